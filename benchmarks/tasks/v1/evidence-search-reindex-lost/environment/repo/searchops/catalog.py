"""The products' rows in the change stream: what each change changed, and rows the catalogue rules refuse."""

import collections

from searchops import feeds

MAX_PRICE_CENTS = 1_000_000
FIELDS = ("title", "price_cents", "stock", "category", "description", "attributes")


def changed_fields(before, after):
    """The fields that differ between two rows (a delete: every field; a first row: every field it has)."""
    if after is None:
        return sorted(before or {})
    if before is None:
        return sorted(after)
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def field_churn(log_dir):
    """Counter of fields changed across the week (consecutive versions of each product)."""
    out = collections.Counter()
    last = {}
    for c in sorted(feeds.iter_changes(log_dir), key=lambda c: c["lsn"]):
        prev = last.get(c["doc"])
        if prev is not None:
            out.update(changed_fields(prev, c["row"]))
        last[c["doc"]] = c["row"]
    return out


def row_problems(row):
    """What the catalogue rules refuse in a row, as short strings."""
    out = []
    if not row.get("title", "").strip():
        out.append("empty title")
    price = row.get("price_cents")
    if not isinstance(price, int) or not 0 < price <= MAX_PRICE_CENTS:
        out.append("price out of range: %r" % (price,))
    if isinstance(row.get("stock"), int) and row["stock"] < 0:
        out.append("negative stock")
    return out


def bad_rows(log_dir):
    """[(change id, doc, problems)] of upserts whose row the rules refuse."""
    return [(c["change"], c["doc"], row_problems(c["row"])) for c in feeds.iter_changes(log_dir)
            if c["op"] == "upsert" and row_problems(c["row"])]
