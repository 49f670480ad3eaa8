"""Orders."""

import re

from shop.users import ValidationError


def _valid_email(value):
    return re.match(r"^[^@\s]+@[^@\s]+\.[a-z]+$", value.strip()) is not None


def _valid_phone(value):
    digits = re.sub(r"[\s().-]", "", value)
    return re.match(r"^\+?[0-9]{7,15}$", digits) is not None


def place_order(items, contact_email, contact_phone=None):
    if not items:
        raise ValidationError("an order needs items")
    if not _valid_email(contact_email):
        raise ValidationError(f"invalid email {contact_email!r}")
    if contact_phone is not None and not _valid_phone(contact_phone):
        raise ValidationError(f"invalid phone {contact_phone!r}")
    return {"items": list(items), "email": contact_email.strip().lower(), "phone": contact_phone}
