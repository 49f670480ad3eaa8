"""Build dist/app.zip from src/app."""

import hashlib
import os
import re
import time
import zipfile

SRC = "src"
OUT = os.path.join("dist", "app.zip")


def version():
    with open(os.path.join(SRC, "app", "__init__.py")) as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def files():
    for root, dirs, names in os.walk(os.path.join(SRC, "app")):
        for name in names:
            path = os.path.join(root, name)
            yield path, os.path.relpath(path, SRC)


def main():
    os.makedirs("dist", exist_ok=True)
    digest = hashlib.sha256()
    with zipfile.ZipFile(OUT, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, arcname in files():
            with open(path, "rb") as f:
                digest.update(f.read())
            zf.write(path, arcname)
        info = f"version={version()}\nsources={digest.hexdigest()}\nbuilt={time.time():.0f}\n"
        zf.writestr("app/BUILD_INFO", info)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
