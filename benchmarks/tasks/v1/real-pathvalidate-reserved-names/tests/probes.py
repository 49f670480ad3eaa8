"""Probes of real-pathvalidate-reserved-names: what the workspace's pathvalidate answers (bench/verdict_runner.py).

Fail-to-pass (pathvalidate 3.2.0, which the history commit's tests and README describe): the sanitizers take a
`reserved_name_handler` (ReservedNameHandler.add_trailing_underscore by default, add_leading_underscore, as_is,
raise_error, or any callable given the ReservedNameError) and `additional_reserved_names` (case-insensitive, for
validators too, a file path's last component included); `check_reserved` of the sanitizers still works but warns
(DeprecationWarning); NullValueHandler.return_null_string / return_timestamp as class methods (the module-level
handlers kept, with a DeprecationWarning); a validator's reserved_keywords sorted and without duplicates; a
ValidationError that says `platform=`, and carries fs_encoding and byte_count for a length error.
Pass-to-pass: sanitizing and validating as pathvalidate 3.1.0 did (invalid and unprintable characters per platform,
replacement text, truncation, normalisation, absolute paths, reserved names with the default behaviour, null values,
LTSV labels and symbols), asked only where 3.1.0 and 3.2.0 answer alike.
"""

import os
import re
import sys
import warnings


def _pv(ctx, sub=None):
    """The workspace's pathvalidate package (or one of its modules), never an installed copy."""
    root = ctx.workspace
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("pathvalidate")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("pathvalidate came from %s, not the workspace" % mod.__file__)
    return ctx.load("pathvalidate." + sub) if sub else mod


def _call(fn, *args, **kwargs):
    """fn's result, or [exception name, reason name or None, message]; with the deprecation warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - which exception is the answer
            reason = getattr(e, "reason", None)
            out = [type(e).__name__, getattr(reason, "name", None), str(e)]
    dep = sorted({type(w.message).__name__ for w in caught if issubclass(w.category, DeprecationWarning)})
    return [out, dep] if dep else out


def _handlers(ctx):
    handler = _pv(ctx, "handler")
    rnh = handler.ReservedNameHandler
    return handler, [rnh.add_trailing_underscore, rnh.add_leading_underscore, rnh.as_is]


# --------------------------------------------------------------------------------------------- fail-to-pass


def probe_filename_reserved_name_handlers(ctx):
    pv = _pv(ctx)
    _, handlers = _handlers(ctx)
    names = ["CON", "con", "COM1.txt", "aux.tar.gz", "LPT9", "nul", "Clock$", "prn."]
    return [[p, [[_call(pv.sanitize_filename, n, platform=p, reserved_name_handler=h) for n in names]
                 for h in handlers]] for p in ("windows", "universal")]


def probe_filepath_reserved_name_handlers(ctx):
    pv = _pv(ctx)
    _, handlers = _handlers(ctx)
    paths = ["CON", "dir/COM1", "dir/com1.txt", "a/aux/b.txt", "nul/nul"]
    return [[p, [[_call(pv.sanitize_filepath, v, platform=p, reserved_name_handler=h) for v in paths]
                 for h in handlers]] for p in ("windows", "universal")]


def probe_reserved_name_handler_raise(ctx):
    pv = _pv(ctx)
    handler, _ = _handlers(ctx)
    out = []
    for p in ("windows", "universal"):
        for fn in (pv.sanitize_filename, pv.sanitize_filepath):
            out.append(_call(fn, "CON", platform=p, reserved_name_handler=handler.raise_error)[:2])
            out.append(_call(fn, "report.txt", platform=p, reserved_name_handler=handler.raise_error))
    return out


def probe_custom_reserved_name_handler(ctx):
    pv = _pv(ctx)
    seen = []

    def handler(e):
        seen.append([type(e).__name__, e.reason.name, e.reserved_name, e.reusable_name])
        return "reserved-" + e.reserved_name.lower()

    out = [_call(pv.sanitize_filename, "COM3", platform="windows", reserved_name_handler=handler),
           _call(pv.sanitize_filename, "COM3.log", platform="universal", reserved_name_handler=handler),
           _call(pv.sanitize_filepath, "logs/LPT1", platform="windows", reserved_name_handler=handler),
           _call(pv.sanitize_filename, "plain.txt", platform="windows", reserved_name_handler=handler)]
    return [out, seen]


def probe_additional_reserved_names_validate(ctx):
    pv = _pv(ctx)
    cases = [["abc", []], ["abc", ["abc"]], ["Abc", ["abc"]], ["ABC", ["abc"]], ["abc.txt", ["abc.txt"]],
             ["abc.txt", ["abc"]], ["abcd", ["abc"]], ["data", ["DATA", "tmp"]]]
    out = [[v, arn, _call(pv.is_valid_filename, v, additional_reserved_names=arn)] for v, arn in cases]
    out.append(_call(pv.validate_filename, "Secret", platform="linux", additional_reserved_names=["secret"])[:2])
    return out


def probe_additional_reserved_names_filepath(ctx):
    pv = _pv(ctx)
    cases = [["abc/efg.txt", ["abc"]], ["abc/efg.txt", ["efg.txt"]], ["abc/efg.txt", ["EFG.TXT"]],
             ["abc/efg.txt", ["hij"]], ["x/y/z", ["y"]]]
    out = [[v, arn, _call(pv.is_valid_filepath, v, platform="linux", additional_reserved_names=arn)]
           for v, arn in cases]
    out.append(_call(pv.validate_filepath, "abc/efg.txt", platform="linux", additional_reserved_names=["efg.txt"])[:2])
    return out


def probe_additional_reserved_names_sanitize(ctx):
    pv = _pv(ctx)
    handler, handlers = _handlers(ctx)
    out = []
    for p in ("windows", "universal", "linux"):
        out.append([p, _call(pv.sanitize_filename, "abc", platform=p, additional_reserved_names=[]),
                    _call(pv.sanitize_filename, "abc", platform=p, additional_reserved_names=["abc"]),
                    _call(pv.sanitize_filename, "ABC", platform=p, additional_reserved_names=["abc"]),
                    _call(pv.sanitize_filepath, "abc", platform=p, additional_reserved_names=["abc"]),
                    _call(pv.sanitize_filename, "abc", platform=p, additional_reserved_names=["abc"],
                          reserved_name_handler=handlers[1]),
                    _call(pv.sanitize_filename, "abc", platform=p, additional_reserved_names=["abc"],
                          reserved_name_handler=handler.raise_error)[:2]])
    return out


def probe_reserved_keywords(ctx):
    pv = _pv(ctx)
    return [list(pv.FileNameValidator(platform="windows").reserved_keywords),
            list(pv.FileNameValidator(platform="linux").reserved_keywords),
            list(pv.FileNameValidator(platform="windows", additional_reserved_names=["CON"]).reserved_keywords),
            list(pv.FileNameValidator(platform="linux", additional_reserved_names=["abc", "efg.txt"])
                 .reserved_keywords),
            list(pv.FileNameSanitizer(additional_reserved_names=["abc"]).reserved_keywords),
            list(pv.FilePathSanitizer(additional_reserved_names=["abc"]).reserved_keywords),
            "ABC" in pv.FilePathValidator(additional_reserved_names=["abc"]).reserved_keywords]


def probe_check_reserved_deprecated(ctx):
    pv = _pv(ctx)
    out = []
    for fn in (pv.sanitize_filename, pv.sanitize_filepath):
        out.append([_call(fn, "CON", platform="windows", check_reserved=False),
                    _call(fn, "CON", platform="windows", check_reserved=True),
                    _call(fn, "CON", platform="windows"),
                    _call(fn, "readme.md", platform="windows")])
    return out


def probe_null_value_handlers(ctx):
    pv = _pv(ctx)
    handler = _pv(ctx, "handler")
    nvh = handler.NullValueHandler
    stamp = re.compile(r"^\d+\.\d+$")
    out = []
    for fn in (pv.sanitize_filename, pv.sanitize_filepath):
        out.append([_call(fn, "", null_value_handler=nvh.return_null_string),
                    bool(stamp.match(fn("", null_value_handler=nvh.return_timestamp))),
                    _call(fn, "?*", platform="windows", null_value_handler=nvh.return_null_string),
                    bool(stamp.match(fn("?*", platform="windows", null_value_handler=nvh.return_timestamp))),
                    _call(fn, "", null_value_handler=handler.raise_error)[:2]])
    return out


def probe_module_level_null_handlers_deprecated(ctx):
    pv = _pv(ctx)
    handler = _pv(ctx, "handler")
    empty = _call(pv.sanitize_filename, "", null_value_handler=handler.return_null_string)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stamped = pv.sanitize_filename("", null_value_handler=handler.return_timestamp)
    return [empty, bool(re.match(r"^\d+\.\d+$", stamped)),
            sorted({w.category.__name__ for w in caught})]


def probe_error_message_platform(ctx):
    pv = _pv(ctx)
    return [_call(pv.validate_filename, "asdf\rsdf", platform="windows"),
            _call(pv.validate_filepath, "asdf\rsdf", platform="windows"),
            _call(pv.validate_filename, "a:b", platform="windows"),
            _call(pv.validate_filename, "COM1", platform="universal"),
            str(pv.ValidationError(description="hoge", platform=pv.Platform.UNIVERSAL,
                                   reason=pv.ErrorReason.INVALID_CHARACTER))]


def probe_length_error_details(ctx):
    pv = _pv(ctx)
    out = []
    for fn, kwargs in [(pv.validate_filename, {"max_len": 10}), (pv.validate_filepath, {"max_len": 10}),
                       (pv.validate_filename, {"platform": "linux"}),
                       (pv.validate_filename, {"max_len": 20, "fs_encoding": "utf-16"})]:
        value = "ab" * 200 if "max_len" not in kwargs or kwargs["max_len"] == 10 else "abcdefghijkl"
        try:
            fn(value, **kwargs)
            out.append(None)
        except pv.ValidationError as e:
            out.append([e.reason.name, e.fs_encoding, e.byte_count, str(e), e.as_slog()])
    return out


# --------------------------------------------------------------------------------------------- pass-to-pass


def probe_sanitize_filename_platforms(ctx):
    pv = _pv(ctx)
    values = ['fi:l*e/p"a?t>h|.t<xt', "a\tb\x00c.txt", "  lead.txt", "trail. ", "x\\y", "ok-name_1.tar.gz",
              "日本語:ファイル.txt", "emoji\U0001f600?.md"]
    return [[p, [pv.sanitize_filename(v, platform=p) for v in values]]
            for p in ("windows", "linux", "macos", "posix", "universal")]


def probe_sanitize_filename_replacement_and_length(ctx):
    pv = _pv(ctx)
    return [pv.sanitize_filename('a?b*c"d', replacement_text="_", platform="windows"),
            pv.sanitize_filename("a/b", replacement_text="-", platform="linux"),
            pv.sanitize_filename("x" * 300 + ".txt"), len(pv.sanitize_filename("x" * 300)),
            pv.sanitize_filename("abcdefghij.txt", max_len=8),
            pv.sanitize_filename("あいうえおかきくけこ", max_len=10)]


def probe_sanitize_filepath_platforms(ctx):
    pv = _pv(ctx)
    values = ["fi:l*e/p\"a?t>h|.t<xt", "a//b/./c/../d.txt", "/abs/path/x?.txt", "C:\\Users\\me\\a*b.txt",
              "dir\x01/f\x7fle", "  spaced / name . txt", "\\\\server\\share\\f.txt"]
    return [[p, [pv.sanitize_filepath(v, platform=p) for v in values]]
            for p in ("windows", "linux", "macos", "universal")]


def probe_sanitize_filepath_normalize(ctx):
    pv = _pv(ctx)
    return [pv.sanitize_filepath("a/./b/../c//d", normalize=True, platform="linux"),
            pv.sanitize_filepath("a/./b/../c//d", normalize=False, platform="linux"),
            pv.sanitize_filepath("a\\b\\c", platform="windows"),
            pv.sanitize_filepath("/a/b/c.txt", platform="windows"),
            pv.sanitize_filepath("x" * 5000, max_len=64, platform="linux")]


def probe_validate_reasons(ctx):
    pv = _pv(ctx)
    cases = [(pv.validate_filename, "", {}), (pv.validate_filename, "a/b", {}),
             (pv.validate_filename, "a:b", {"platform": "windows"}),
             (pv.validate_filename, "a:b", {"platform": "linux"}),
             (pv.validate_filename, "COM1", {"platform": "windows"}),
             (pv.validate_filename, "COM1", {"platform": "linux"}),
             (pv.validate_filename, "CON", {"platform": "windows", "check_reserved": False}),
             (pv.validate_filename, "x" * 256, {}), (pv.validate_filename, "a ", {"platform": "windows"}),
             (pv.validate_filename, "a\x00", {"platform": "linux"}),
             (pv.validate_filepath, "/a/b", {"platform": "windows"}),
             (pv.validate_filepath, "/a/b", {"platform": "linux"}),
             (pv.validate_filepath, "C:\\a\\b", {"platform": "windows"}),
             (pv.validate_filepath, "a/COM1/b", {"platform": "windows"}), (pv.validate_filepath, "", {}),
             (pv.validate_filepath, "a?b/c", {"platform": "universal"})]
    out = []
    for fn, v, kw in cases:
        r = _call(fn, v, **kw)
        out.append(r[:2] if isinstance(r, list) else r)
    return out


def probe_is_valid(ctx):
    pv = _pv(ctx)
    names = ["a.txt", "a?.txt", "COM1", "com1.txt", "con.", " lead", "trail ", ".", "..", "a" * 255, "a" * 256]
    paths = ["a/b.txt", "/a/b.txt", "C:\\a\\b.txt", "a/../b", "a/CON", "a//b", "a/b?c"]
    return [[p, [pv.is_valid_filename(n, platform=p) for n in names],
             [pv.is_valid_filepath(v, platform=p) for v in paths]] for p in ("windows", "linux", "universal")]


def probe_default_reserved_sanitizing(ctx):
    pv = _pv(ctx)
    names = ["CON", "con", "COM1.txt", "lpt2.tar", "AUX", "nul.", "com10", "console"]
    return [[p, [pv.sanitize_filename(n, platform=p) for n in names],
             [pv.sanitize_filepath("dir/" + n, platform=p) for n in names]] for p in ("windows", "universal", "linux")]


def probe_unprintable_and_ansi(ctx):
    pv = _pv(ctx)
    return [pv.replace_unprintable_char("a\x00b\x1fc\x7fd"), pv.replace_unprintable_char("a\nb", "_"),
            pv.replace_ansi_escape("\x1b[31mred\x1b[0m"), pv.replace_ansi_escape("\x1b[1mb\x1b[0m", "#"),
            _call(pv.validate_unprintable_char, "ok"), _call(pv.validate_unprintable_char, "b\x07ad")[:2],
            list(pv.unprintable_ascii_chars)[:5], len(pv.ascii_symbols)]


def probe_ltsv_and_symbols(ctx):
    pv = _pv(ctx)
    return [pv.sanitize_ltsv_label("a b:c\td"), pv.sanitize_ltsv_label("x!y", replacement_text="_"),
            _call(pv.validate_ltsv_label, "a:b")[:2], _call(pv.validate_ltsv_label, "good_label.1-2"),
            pv.replace_symbol("a!b@c#d$"), pv.replace_symbol("a b-c", replacement_text="_"),
            pv.replace_symbol("a..b", exclude_symbols=["."]), _call(pv.validate_symbol, "a$b")[:2]]


def probe_platform_normalisation(ctx):
    pv = _pv(ctx)
    return [pv.normalize_platform(p).name for p in ("windows", "Linux", "macOS", "posix", "universal", None)] + [
        pv.FileNameSanitizer(255, platform="linux").platform.name,
        pv.FilePathValidator(platform="windows").platform.name]
