"""Probes of bug-cursor-pagination: the posts a client sees paging through the feed (bench/verdict_runner.py)."""

import random


def _walk(ctx, store, limit):
    """Every id a client collects following `next` cursors (None if paging never ends or a cursor is not a str)."""
    list_feed = ctx.load("feed.api").list_feed
    seen, cursor = [], None
    for _ in range(10000):
        page = list_feed(store, cursor, limit)
        seen += page["items"]
        cursor = page["next"]
        if cursor is None:
            return seen
        if not isinstance(cursor, str):
            return None
    return None


def _store(ctx, posts):
    Post, PostStore = ctx.load("feed.models").Post, ctx.load("feed.store").PostStore
    return PostStore(Post(*p) for p in posts)


def probe_bulk_import_same_second(ctx):
    got = _walk(ctx, _store(ctx, [(i, 5000, "x") for i in range(1, 26)]), 10)
    return None if got is None else sorted(got)


def probe_every_post_once_random(ctx):
    """Per (trial, limit): the ids seen, sorted, and whether none was seen twice."""
    rng, out = random.Random(7), []
    for _ in range(20):
        posts = [(i, rng.randint(0, 30), "x") for i in rng.sample(range(1000), 120)]
        store = _store(ctx, posts)
        for limit in (1, 3, 7, 50):
            got = _walk(ctx, store, limit)
            out.append(None if got is None else [sorted(got), len(got) == len(set(got))])
    return out


def probe_order_is_by_time(ctx):
    created = {3: 10, 1: 20, 2: 10}
    got = _walk(ctx, _store(ctx, [(3, 10, "a"), (1, 20, "b"), (2, 10, "c")]), 1)
    return None if got is None else [created[i] for i in got]


def probe_last_page_has_no_cursor(ctx):
    first = ctx.load("feed.api").list_feed(_store(ctx, [(i, 1, "x") for i in range(4)]), None, 4)
    return [len(first["items"]), first["next"]]
