"""User export for billing."""

from userexport.export import to_csv
from userexport.models import User, load_users

__all__ = ["User", "load_users", "to_csv"]
