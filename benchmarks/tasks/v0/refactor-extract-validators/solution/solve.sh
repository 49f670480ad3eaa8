#!/usr/bin/env bash
set -euo pipefail
cat > shop/validators.py <<'PY'
"""The one place that decides what a valid e-mail address and phone number are."""

import re

EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
PHONE = re.compile(r"^\+?[0-9]{7,15}$")


def normalize_phone(value):
    """The phone number without spaces, dots, dashes and parentheses."""
    return re.sub(r"[\s().-]", "", value)


def is_email(value):
    return EMAIL.match(value.strip()) is not None


def is_phone(value):
    return PHONE.match(normalize_phone(value)) is not None
PY
cat > shop/users.py <<'PY'
"""User accounts."""

from shop.validators import is_email, is_phone, normalize_phone


class ValidationError(ValueError):
    pass


def make_user(name, email, phone=None):
    if not name.strip():
        raise ValidationError("name is empty")
    if not is_email(email):
        raise ValidationError(f"invalid email {email!r}")
    if phone is not None and not is_phone(phone):
        raise ValidationError(f"invalid phone {phone!r}")
    return {"name": name.strip(), "email": email.strip().lower(), "phone": phone and normalize_phone(phone)}
PY
cat > shop/orders.py <<'PY'
"""Orders."""

from shop.users import ValidationError
from shop.validators import is_email, is_phone


def place_order(items, contact_email, contact_phone=None):
    if not items:
        raise ValidationError("an order needs items")
    if not is_email(contact_email):
        raise ValidationError(f"invalid email {contact_email!r}")
    if contact_phone is not None and not is_phone(contact_phone):
        raise ValidationError(f"invalid phone {contact_phone!r}")
    return {"items": list(items), "email": contact_email.strip().lower(), "phone": contact_phone}
PY
