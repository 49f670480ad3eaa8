"""Probes of bug-search-stale-cache: search results and cache counters after edits (bench/verdict_runner.py)."""


def _setup(ctx):
    notes = ctx.load("notes")
    store = notes.NoteStore()
    a, b = store.add("Buy milk and eggs"), store.add("Call the bank about the card")
    return store, a, b, notes.Searcher(store)


def _ids(results, names):
    """Results with note ids replaced by their names in the probe (ids are the store's business)."""
    return [names.get(r, r) for r in results]


def probe_update_is_seen(ctx):
    store, a, b, s = _setup(ctx)
    names = {a: "a", b: "b"}
    out = [_ids(s.search("milk"), names)]
    store.update(a, "Buy bread")
    return out + [_ids(s.search("milk"), names), _ids(s.search("bread"), names)]


def probe_delete_is_seen(ctx):
    store, a, b, s = _setup(ctx)
    names = {a: "a", b: "b"}
    out = [_ids(s.search("bank"), names)]
    store.delete(b)
    return out + [_ids(s.search("bank"), names)]


def probe_add_is_seen(ctx):
    store, a, b, s = _setup(ctx)
    names = {a: "a", b: "b"}
    out = [_ids(s.search("card"), names)]
    names[store.add("New card arrived")] = "c"
    return out + [_ids(s.search("card"), names)]


def probe_repeated_queries_hit_the_cache(ctx):
    store, a, b, s = _setup(ctx)
    for _ in range(5):
        s.search("milk eggs")
    out = [s.stats()]
    store.update(a, "milk eggs flour")
    out.append(_ids(s.search("milk eggs"), {a: "a", b: "b"}))
    s.search("milk eggs")
    return out + [s.stats()]


def probe_results_are_copies(ctx):
    store, a, b, s = _setup(ctx)
    s.search("milk").append(99)
    return _ids(s.search("milk"), {a: "a", b: "b"})
