#!/usr/bin/env bash
# Sorted file order, no caches, fixed timestamps and permissions, no build time, and a hash over paths + contents.
set -euo pipefail
cat > build.py <<'PY'
"""Build dist/app.zip from src/app, reproducibly (see README)."""

import hashlib
import os
import re
import zipfile

SRC = "src"
OUT = os.path.join("dist", "app.zip")
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can store


def version():
    with open(os.path.join(SRC, "app", "__init__.py")) as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def files():
    """(path, arcname) of the packaged files, sorted by arcname; no caches or bytecode."""
    out = []
    for root, dirs, names in os.walk(os.path.join(SRC, "app")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if not name.endswith((".pyc", ".pyo")):
                path = os.path.join(root, name)
                out.append((path, os.path.relpath(path, SRC).replace(os.sep, "/")))
    return sorted(out, key=lambda p: p[1])


def _entry(arcname):
    info = zipfile.ZipInfo(arcname, date_time=EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    info.create_system = 3
    return info


def main():
    os.makedirs("dist", exist_ok=True)
    digest = hashlib.sha256()
    with zipfile.ZipFile(OUT, "w") as zf:
        for path, arcname in files():
            with open(path, "rb") as f:
                data = f.read()
            digest.update(arcname.encode() + b"\0" + hashlib.sha256(data).digest())
            zf.writestr(_entry(arcname), data)
        zf.writestr(_entry("app/BUILD_INFO"), f"version={version()}\nsources={digest.hexdigest()}\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
PY
