"""User accounts."""

import re

EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
PHONE = re.compile(r"^\+?[0-9]{7,15}$")


class ValidationError(ValueError):
    pass


def normalize_phone(value):
    return re.sub(r"[\s().-]", "", value)


def make_user(name, email, phone=None):
    if not name.strip():
        raise ValidationError("name is empty")
    if not EMAIL.match(email.strip()):
        raise ValidationError(f"invalid email {email!r}")
    if phone is not None and not PHONE.match(normalize_phone(phone)):
        raise ValidationError(f"invalid phone {phone!r}")
    return {"name": name.strip(), "email": email.strip().lower(), "phone": phone and normalize_phone(phone)}
