"""Posts."""


class Post:
    """A post; it keeps its own list of tags (a list passed in is copied, never shared)."""

    def __init__(self, title, tags=[], visibility="public"):
        self.title = title
        self.tags = tags
        self.visibility = visibility

    def add_tag(self, tag):
        tag = tag.strip().lower()
        if tag and tag not in self.tags:
            self.tags.append(tag)
        return self
