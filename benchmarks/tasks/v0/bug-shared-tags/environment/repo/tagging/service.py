"""What the web handlers call."""

from tagging.models import Post

DEFAULTS = {"visibility": "public"}


def create_post(title, tags=None):
    post = Post(title) if tags is None else Post(title, tags)
    return post


def bulk_create(titles, options={}):
    """Posts for each title; options: {"visibility": ..., "tag": extra tag for every post}. Calls never affect each other."""
    options.update({k: v for k, v in DEFAULTS.items() if k not in options})
    posts = []
    for title in titles:
        post = Post(title, visibility=options["visibility"])
        if "tag" in options:
            post.add_tag(options["tag"])
        posts.append(post)
    return posts
