"""Docker's USER rule inside an image sandbox: a user spec to uid, gid, supplementary groups and home.

A spec is "" (root), "NAME" or "UID", optionally ":GROUP" or ":GID". Names are looked up in the image's
/etc/passwd and /etc/group (read with the guest chrooted into the image); a numeric uid missing from passwd runs
with gid 0 and home "/", as Docker does (https://docs.docker.com/reference/dockerfile/#user).
"""

import collections

User = collections.namedtuple("User", "uid gid groups home name")
ROOT = User(0, 0, (), "/root", "root")


class UserError(Exception):
    """A user or group the image does not have."""


def _table(path):
    """Rows of a colon-separated file (missing file: none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\n").split(":") for line in f if line.strip() and not line.startswith("#")]
    except OSError:
        return []


def _group_id(spec, groups):
    """A group name or number to its gid."""
    if spec.isdigit():
        return int(spec)
    for row in groups:
        if len(row) >= 3 and row[0] == spec:
            return int(row[2])
    raise UserError(f"group {spec!r} does not exist in the image's /etc/group")


def resolve(spec):
    """The User of a spec, from the current root's /etc/passwd and /etc/group (UserError if unknown)."""
    spec = (spec or "").strip()
    if spec in ("", "root", "0"):
        return ROOT
    name, _, group = spec.partition(":")
    passwd, groups = _table("/etc/passwd"), _table("/etc/group")
    entry = next((row for row in passwd if len(row) >= 7 and (row[0] == name or row[2] == name)), None)
    if entry is None and not name.isdigit():
        raise UserError(f"user {name!r} does not exist in the image's /etc/passwd")
    uid = int(name) if entry is None else int(entry[2])
    gid = _group_id(group, groups) if group else (0 if entry is None else int(entry[3]))
    user_name = entry[0] if entry else name
    extra = tuple(sorted({int(row[2]) for row in groups
                          if len(row) >= 4 and user_name in row[3].split(",") and row[2].isdigit()} - {gid}))
    return User(uid, gid, extra, entry[5] if entry and entry[5] else "/", user_name)
