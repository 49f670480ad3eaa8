"""Probes of real-loguru-file-watch: what the workspace's loguru answers (bench/verdict_runner.py).

Fail-to-pass (loguru 0.7.0, "watch" for file sinks, tests/test_filesink_watch.py ported): a file sink added with
watch=True re-opens its file, before writing and before closing, when an external program deleted it, replaced it
or removed its folder (device and inode compared), with the sink's own arguments (encoding, errors, mode), its
formatted path, and before rotation, compression and retention see the file; it opens nothing more than before
otherwise; watch=False is accepted and changes nothing. Pass-to-pass: file sinks without the option (creation,
delay, mode, rotation by size, retention by count, compression, formatting, levels) as loguru 0.6.0 answered them.

Every probe starts from a logger without handlers and works in its own folder under the child's temporary one.
"""

import gzip
import os
import sys

_N = [0]


def _lg(ctx):
    """The workspace's loguru logger, without handlers."""
    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("loguru")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("loguru came from %s, not the workspace" % mod.__file__)
    mod.logger.remove()
    return mod.logger


def _dir(ctx):
    """A fresh folder for one probe."""
    _N[0] += 1
    path = os.path.join(ctx.tmp, "p%02d" % _N[0])
    os.makedirs(path)
    return path


def _read(path):
    with open(path, encoding="utf8") as f:
        return f.read()


def _listing(folder):
    """The folder's files (relative, sorted) and their contents; time-stamped names replaced by their shape."""
    out = []
    for dirpath, _, files in os.walk(folder):
        for name in sorted(files):
            full = os.path.join(dirpath, name)
            shape = "".join("9" if c.isdigit() else c for c in os.path.relpath(full, folder))
            if name.endswith(".gz"):
                with gzip.open(full, "rt", encoding="utf8") as f:
                    out.append([shape, f.read()])
            else:
                out.append([shape, _read(full)])
    return sorted(out)


def probe_deleted_before_write(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    logger.add(path, format="{message}", watch=True, delay=False)
    os.remove(path)
    logger.info("Test")
    out = [os.path.exists(path) and _read(path)]
    logger.info("Again")
    out.append(_read(path))
    logger.remove()
    return out


def probe_deleted_before_write_with_delay(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    logger.add(path, format="{message}", watch=True, delay=True)
    out = [os.path.exists(path)]
    logger.info("Test 1")
    os.remove(path)
    logger.info("Test 2")
    out.append(os.path.exists(path) and _read(path))
    logger.remove()
    return out


def probe_path_with_placeholder(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    logger.add(os.path.join(folder, "test_{time}.log"), format="{message}", watch=True)
    files = os.listdir(folder)
    os.remove(os.path.join(folder, files[0]))
    logger.info("Test")
    after = os.listdir(folder)
    logger.remove()
    return [len(files), after == files, _listing(folder)]


def probe_reopened_with_arguments(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    logger.add(path, format="{message}", watch=True, encoding="ascii", errors="replace")
    os.remove(path)
    logger.info("\u00e9t\u00e9")
    logger.remove()
    return os.path.exists(path) and _read(path)


def probe_file_replaced_by_another(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    logger.add(path, format="{message}", watch=True, mode="w")
    os.remove(path)
    with open(path, "w") as f:
        f.write("Placeholder")
    logger.info("Test")
    logger.remove()
    return _read(path)


def probe_file_swapped_in_place(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "app.log")
    logger.add(path, format="{message}", watch=True)
    logger.info("before")
    other = os.path.join(folder, "fresh.tmp")
    with open(other, "w") as f:
        f.write("header\n")
    os.replace(other, path)  # same name, another inode: the sink must follow the name
    logger.info("after")
    logger.remove()
    return _listing(folder)


def probe_file_moved_away(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "app.log")
    logger.add(path, format="{message}", watch=True)
    logger.info("one")
    os.rename(path, path + ".1")  # logrotate's default: move, then expect the writer to start a new file
    logger.info("two")
    logger.info("three")
    logger.remove()
    return _listing(folder)


def probe_folder_deleted(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "foo", "bar", "test.log")
    logger.add(path, format="{message}", watch=True)
    os.remove(path)
    os.rmdir(os.path.join(folder, "foo", "bar"))
    logger.info("Test")
    logger.remove()
    return os.path.exists(path) and _read(path)


def probe_deleted_before_rotation(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    seen = []

    def rotate(message, file):
        seen.append([os.path.exists(path), os.path.exists(file.name)])
        return False

    logger.add(path, format="{message}", watch=True, rotation=rotate)
    os.remove(path)
    logger.info("Test")
    logger.remove()
    return [seen, _read(path)]


def probe_deleted_before_compression(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    seen = []

    def compress(name):
        seen.append([os.path.exists(path), os.path.basename(name)])

    logger.add(path, format="{message}", watch=True, compression=compress)
    os.remove(path)
    logger.remove()
    return seen


def probe_deleted_before_retention(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    seen = []

    def retain(logs):
        seen.append([os.path.exists(path), sorted(os.path.basename(x) for x in logs)])

    logger.add(path, format="{message}", watch=True, retention=retain)
    os.remove(path)
    logger.remove()
    return seen


def probe_reused_after_rotation(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "test.log")
    answers = iter([False, True, False])
    logger.add(path, format="{message}", mode="w", watch=True, rotation=lambda m, f: next(answers))
    logger.info("Test 1")
    logger.info("Test 2")
    logger.info("Test 3")
    logger.remove()
    return _listing(folder)


def probe_closed_without_being_logged(ctx):
    out = []
    for delay in (True, False):
        for compression in (None, lambda _: None):
            logger = _lg(ctx)
            path = os.path.join(_dir(ctx), "test.log")
            logger.add(path, format="{message}", watch=True, delay=delay, compression=compression)
            logger.remove()
            out.append(os.path.exists(path))
    return out


def probe_watched_file_left_alone(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    logger.add(path, format="{message}", watch=True, mode="w")
    for i in range(4):
        logger.info("line {}", i)
    out = [_read(path)]
    logger.remove()
    return out + [_read(path)]


def probe_watch_false_keeps_old_behaviour(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "test.log")
    logger.add(path, format="{message}", watch=False)
    logger.info("one")
    os.remove(path)
    logger.info("two")
    logger.remove()
    return [os.path.exists(path), os.listdir(folder)]


def probe_two_sinks_one_watched(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    watched, plain = os.path.join(folder, "watched.log"), os.path.join(folder, "plain.log")
    logger.add(watched, format="{level} {message}", watch=True)
    logger.add(plain, format="{level} {message}", level="WARNING")
    os.remove(watched)
    os.remove(plain)
    logger.info("info")
    logger.warning("warn")
    logger.remove()
    return _listing(folder)


def probe_unwatched_deleted_file(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "test.log")
    logger.add(path, format="{message}")
    logger.info("one")
    os.remove(path)
    logger.info("two")
    logger.remove()
    return [os.path.exists(path), os.listdir(folder)]


def probe_file_sink_basics(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    a, w = os.path.join(folder, "append.log"), os.path.join(folder, "write.log")
    with open(a, "w") as f:
        f.write("old\n")
    with open(w, "w") as f:
        f.write("old\n")
    logger.add(a, format="{level}|{message}|{extra[user]}", level="INFO")
    logger.add(w, format="{level.no} {message}", mode="w", filter=lambda r: r["extra"].get("user") == "bob")
    logger.bind(user="ann").debug("hidden")
    logger.bind(user="ann").info("hello {}", "ann")
    logger.bind(user="bob").error("oops")
    logger.remove()
    return _listing(folder)


def probe_delay_creates_on_first_message(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "sub", "late.log")
    logger.add(path, format="{message}", delay=True)
    out = [os.path.exists(path)]
    logger.info("now")
    out.append(_read(path))
    logger.remove()
    return out


def probe_rotation_retention_compression(ctx):
    logger = _lg(ctx)
    folder = _dir(ctx)
    path = os.path.join(folder, "size.log")
    logger.add(path, format="{message}", rotation=12, retention=2)
    for i in range(6):
        logger.info("message {}", i)
    logger.remove()
    sized = _listing(folder)
    folder2 = _dir(ctx)
    logger.add(os.path.join(folder2, "zip.log"), format="{message}", compression="gz")
    logger.info("packed")
    logger.remove()
    live = [c for name, c in sized if name == "size.log"]
    return [len(sized), live, sorted(c for _, c in sized), _listing(folder2)]


def probe_invalid_option_refused(ctx):
    logger = _lg(ctx)
    path = os.path.join(_dir(ctx), "test.log")
    out = [ctx.message(TypeError, logger.add, path, frobnicate=True) is not None]
    out.append(ctx.message(ValueError, logger.add, path, rotation="every blue moon"))
    out.append(ctx.message(ValueError, logger.add, path, compression="rar5"))
    logger.remove()
    return out
