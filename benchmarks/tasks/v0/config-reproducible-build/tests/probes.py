"""Probes of config-reproducible-build: build twice under different conditions, compare the artifacts
(bench/verdict_runner.py)."""

import hashlib
import os
import shutil
import sys
import tempfile
import time
import zipfile


def _copy_repo(ctx, reverse=False):
    """build.py and src/ in a fresh folder, files created in sorted or reverse order."""
    dst = tempfile.mkdtemp(dir=ctx.tmp)
    shutil.copy(ctx.path("build.py"), dst)
    paths = []
    for root, dirs, names in os.walk(ctx.path("src")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        paths += [os.path.relpath(os.path.join(root, n), ctx.workspace) for n in names if not n.endswith(".pyc")]
    for path in sorted(paths, reverse=reverse):
        os.makedirs(os.path.join(dst, os.path.dirname(path)), exist_ok=True)
        shutil.copy(ctx.path(path), os.path.join(dst, path))
    return dst


def _build(ctx, d):
    """The bytes of dist/app.zip after `python3 build.py` in d (None if the build failed)."""
    r = ctx.run([sys.executable, "build.py"], cwd=d)
    path = os.path.join(d, "dist", "app.zip")
    if r["returncode"] != 0 or not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def probe_identical_across_time_mtime_mode_and_order(ctx):
    a, b = _copy_repo(ctx), _copy_repo(ctx, reverse=True)
    first = _build(ctx, a)
    for root, _, names in os.walk(os.path.join(b, "src")):
        for n in names:
            os.utime(os.path.join(root, n), (1_500_000_000, 1_500_000_000))
    os.chmod(os.path.join(b, "src", "app", "words.py"), 0o600)
    os.makedirs(os.path.join(b, "src", "app", "__pycache__"))
    with open(os.path.join(b, "src", "app", "__pycache__", "words.cpython-311.pyc"), "wb") as f:
        f.write(b"junk")
    time.sleep(1.1)
    second, third = _build(ctx, b), _build(ctx, a)
    if first is None:
        return None
    same_hash = hashlib.sha256(first).hexdigest() == hashlib.sha256(second or b"").hexdigest()
    return [first == second, first == third, same_hash]


def probe_contents(ctx):
    a = _copy_repo(ctx)
    os.makedirs(os.path.join(a, "src", "app", "__pycache__"))
    open(os.path.join(a, "src", "app", "__pycache__", "x.pyc"), "wb").close()
    if _build(ctx, a) is None:
        return None
    with zipfile.ZipFile(os.path.join(a, "dist", "app.zip")) as zf:
        names = sorted(zf.namelist())
        info = zf.read("app/BUILD_INFO").decode() if "app/BUILD_INFO" in names else ""
    sources = [line for line in info.splitlines() if line.startswith("sources=")]
    return [names, "version=2.3.0" in info,
            bool(sources) and len(sources[0]) == len("sources=") + 64
            and all(c in "0123456789abcdef" for c in sources[0][len("sources="):])]


def _sources(ctx, d):
    if _build(ctx, d) is None:
        return None
    with zipfile.ZipFile(os.path.join(d, "dist", "app.zip")) as zf:
        lines = zf.read("app/BUILD_INFO").decode().splitlines()
    return next((line for line in lines if line.startswith("sources=")), None)


def probe_hash_tracks_content_and_paths(ctx):
    a = _copy_repo(ctx)
    before = _sources(ctx, a)
    with open(os.path.join(a, "src", "app", "data", "words.txt"), "a") as f:
        f.write("more\n")
    changed = _sources(ctx, a)
    os.rename(os.path.join(a, "src", "app", "data", "words.txt"), os.path.join(a, "src", "app", "data", "words2.txt"))
    renamed = _sources(ctx, a)
    if None in (before, changed, renamed):
        return None
    return [before != changed, changed != renamed]


def probe_artifact_runs(ctx):
    a, b = _copy_repo(ctx), _copy_repo(ctx)
    if _build(ctx, a) is None:
        return None
    r = ctx.run([sys.executable, "-m", "app"], cwd=b, env={"PYTHONPATH": os.path.join(a, "dist", "app.zip")})
    return [r["returncode"], r["stdout"]]
