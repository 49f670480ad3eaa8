"""Probes of feature-undo-redo: buffer text and undo/redo results after edit sequences (bench/verdict_runner.py)."""


def _buffer(ctx, *args, **kwargs):
    return ctx.load("editor").Buffer(*args, **kwargs)


def probe_undo_each_kind(ctx):
    b = _buffer(ctx, "hello world")
    b.insert(5, ",")
    b.delete(0, 1)
    b.replace("o", "0")
    out = [b.text]
    for _ in range(4):
        out += [bool(b.undo()), b.text]
    return out


def probe_redo(ctx):
    b = _buffer(ctx, "abc")
    b.insert(3, "d")
    b.delete(0, 1)
    b.undo()
    b.undo()
    out = []
    for _ in range(2):
        out += [bool(b.redo()), b.text]
    return out + [bool(b.redo())]


def probe_new_edit_clears_redo(ctx):
    b = _buffer(ctx, "abc")
    b.insert(0, "x")
    b.undo()
    b.insert(3, "y")
    return [bool(b.redo()), b.text, bool(b.undo()), b.text]


def probe_noops_and_errors_not_recorded(ctx):
    b = _buffer(ctx, "abc")
    b.insert(1, "")
    b.delete(2, 2)
    return [b.replace("zz", "y"), ctx.raises(IndexError, b.insert, 10, "x"), ctx.raises(ValueError, b.delete, 2, 1),
            bool(b.undo()), b.text]


def probe_history_limit(ctx):
    b = _buffer(ctx, "", history_limit=3)
    for ch in "abcde":
        b.insert(len(b.text), ch)
    out = [bool(b.undo()), bool(b.undo()), bool(b.undo()), bool(b.undo()), b.text]
    return out + [bool(b.redo()), b.text]


def probe_delete_returns_text_still(ctx):
    b = _buffer(ctx, "hello")
    out = [b.delete(1, 3)]
    b.undo()
    return out + [b.text]
