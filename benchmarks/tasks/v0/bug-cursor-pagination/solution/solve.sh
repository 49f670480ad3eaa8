#!/usr/bin/env bash
# Order by (created_at, id) and make the cursor that pair, so posts sharing a timestamp are never skipped.
set -euo pipefail
cat > feed/store.py <<'PY'
"""In-memory post store."""


class PostStore:
    def __init__(self, posts=()):
        self._posts = {p.id: p for p in posts}

    def add(self, post):
        self._posts[post.id] = post

    def ordered(self):
        """All posts by creation time, ties broken by id (a total order, so cursors are exact)."""
        return sorted(self._posts.values(), key=lambda p: (p.created_at, p.id))
PY
cat > feed/api.py <<'PY'
"""The feed endpoint."""

from feed import cursor as cursors


def list_feed(store, cursor=None, limit=20):
    """One page of posts after `cursor` (oldest first) and the cursor of the next page."""
    posts = store.ordered()
    if cursor is not None:
        after = tuple(cursors.decode(cursor))
        posts = [p for p in posts if (p.created_at, p.id) > after]
    page = posts[:limit]
    more = len(posts) > limit
    nxt = cursors.encode([page[-1].created_at, page[-1].id]) if more else None
    return {"items": [p.id for p in page], "next": nxt}
PY
