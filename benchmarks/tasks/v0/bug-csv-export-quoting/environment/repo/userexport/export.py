"""CSV export."""

HEADER = ("id", "name", "email", "plan")


def _row(user):
    return [str(user.id), user.name, user.email, user.plan]


def to_csv(users):
    """The users as CSV text: a header line, then one line per user."""
    lines = [",".join(HEADER)]
    for user in users:
        lines.append(",".join(_row(user)))
    return "\n".join(lines) + "\n"
