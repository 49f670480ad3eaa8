"""Probes of bug-shared-tags: tags and options of posts created one after another (bench/verdict_runner.py)."""

import inspect


def probe_posts_do_not_share_tags(ctx):
    service, models = ctx.load("tagging.service"), ctx.load("tagging.models")
    a, b = service.create_post("a"), service.create_post("b")
    a.add_tag("secret")
    return [list(a.tags), list(b.tags), list(models.Post("c").tags)]


def probe_given_list_is_copied(ctx):
    mine = ["x"]
    p = ctx.load("tagging.models").Post("p", mine)
    p.add_tag("y")
    return [mine, list(p.tags)]


def probe_bulk_calls_are_independent(ctx):
    service = ctx.load("tagging.service")
    opts = {"visibility": "private", "tag": "import-1"}
    service.bulk_create(["a"], opts)
    first = service.bulk_create(["a"])
    service.bulk_create(["b"], {"tag": "t"})
    again = service.bulk_create(["c"])
    return [opts, [first[0].visibility, list(first[0].tags)], list(again[0].tags), service.DEFAULTS]


def probe_default_options_not_mutated(ctx):
    service = ctx.load("tagging.service")
    default = inspect.signature(service.bulk_create).parameters["options"].default
    service.bulk_create(["z"])
    return default is None or default is inspect.Parameter.empty or default == {}
