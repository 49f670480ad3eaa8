"""The feed endpoint."""

from feed import cursor as cursors


def list_feed(store, cursor=None, limit=20):
    """One page of posts after `cursor` (oldest first) and the cursor of the next page."""
    posts = store.ordered()
    if cursor is not None:
        after = cursors.decode(cursor)
        posts = [p for p in posts if p.created_at > after]
    page = posts[:limit]
    more = len(posts) > limit
    return {"items": [p.id for p in page], "next": cursors.encode(page[-1].created_at) if more else None}
