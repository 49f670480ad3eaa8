"""The hidden truth of a real-repository task: the diff between two consecutive releases' source distributions.

Run: python -m benchmarks.release_diff OLD.tar.gz NEW.tar.gz PATH [PATH ...] > solution/upstream.patch

Both sdists are unpacked as bench/sdist_repo.py unpacks a starting repository (top folder stripped, build metadata
dropped); the output is `git diff --no-index` of the named paths (files or folders, relative to the release's
root) with a/ and b/ prefixes, ready for `patch -p1` in the earlier release's tree. Binary files are refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from composer2_jax.bench import sdist_repo


def release_diff(old: str, new: str, paths: list[str]) -> str:
    """The unified diff old -> new restricted to paths (relative to each release's root)."""
    with tempfile.TemporaryDirectory() as tmp:
        trees = []
        for i, archive in enumerate((old, new)):
            root = os.path.join(tmp, "ab"[i])
            os.makedirs(root)
            sdist_repo.unpack(archive, root)
            sdist_repo.strip_metadata(root)
            trees.append(root)
        out = []
        for path in paths:
            run = subprocess.run(["git", "diff", "--no-index", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/",
                                  os.path.join("a", path), os.path.join("b", path)],
                                 cwd=tmp, capture_output=True, text=True, check=False)
            if run.returncode not in (0, 1):
                raise SystemExit(f"git diff failed on {path}: {run.stderr}")
            if "Binary files" in run.stdout:
                raise SystemExit(f"{path}: binary files differ; name text paths only")
            out.append(run.stdout.replace("a/a/", "a/").replace("b/b/", "b/"))
        return "".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__.splitlines()[2])
    sys.stdout.write(release_diff(sys.argv[1], sys.argv[2], sys.argv[3:]))
