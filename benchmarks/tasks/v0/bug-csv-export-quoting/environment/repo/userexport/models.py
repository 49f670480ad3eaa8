"""User records as the account service sends them."""

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class User:
    id: int
    name: str
    email: str
    plan: str

    @classmethod
    def from_dict(cls, d):
        return cls(int(d["id"]), str(d["name"]), str(d["email"]), str(d.get("plan", "free")))


def load_users(path):
    """Users from a JSON file holding a list of objects."""
    with open(path, encoding="utf-8") as f:
        return [User.from_dict(d) for d in json.load(f)]
