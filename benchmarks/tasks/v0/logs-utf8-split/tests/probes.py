"""Probes of logs-utf8-split: decoded text of split streams and the detector's answers (bench/verdict_runner.py;
the captures come from the runner's setup.py)."""

TEXT = "ok 🚀 größer 日本"


def probe_character_split_across_chunks(ctx):
    decode_chunks = ctx.load("streamclient").decode_chunks
    data = TEXT.encode()
    return [decode_chunks([data[:cut], data[cut:]]) for cut in range(1, len(data))]


def probe_one_byte_chunks(ctx):
    data = "naïve 😀".encode()
    return ctx.load("streamclient").decode_chunks([data[i:i + 1] for i in range(len(data))])


def probe_empty(ctx):
    return ctx.load("streamclient").decode_chunks([])


def probe_detector_on_fresh_captures(ctx):
    detect = ctx.load("detect")
    return [bool(detect.is_affected(path)) for path in ctx.fixture["captures"]]
