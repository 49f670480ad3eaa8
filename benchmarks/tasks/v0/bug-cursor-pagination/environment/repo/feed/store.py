"""In-memory post store."""


class PostStore:
    def __init__(self, posts=()):
        self._posts = {p.id: p for p in posts}

    def add(self, post):
        self._posts[post.id] = post

    def ordered(self):
        """All posts by creation time."""
        return sorted(self._posts.values(), key=lambda p: p.created_at)
