"""The hidden truth of a real-repository task: the diff between two consecutive releases' source distributions.

Run: python -m benchmarks.tasks.release_diff OLD.tar.gz NEW.tar.gz PATH [PATH ...] > solution/upstream.patch

Both sdists are unpacked as bench/authoring/sdist_repo.py unpacks a starting repository (top folder stripped, build
metadata dropped); the output is `git diff --no-index` of the named paths (files or folders, relative to the release's
root) with a/ and b/ prefixes, ready for `patch -p1` in the earlier release's tree. Binary files are refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from composer2_jax.bench.authoring import sdist_repo


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
            sides = [os.path.join(tree, path) for tree in "ab"]
            present = [os.path.exists(os.path.join(tmp, side)) for side in sides]
            if not any(present):
                raise SystemExit(f"{path}: in neither release")
            sides = [side if here else os.devnull for side, here in zip(sides, present)]  # a file one release adds
            run = subprocess.run(["git", "diff", "--no-index", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/",
                                  *sides], cwd=tmp, capture_output=True, text=True, check=False)
            if run.returncode not in (0, 1) or run.stderr.strip():
                raise SystemExit(f"git diff failed on {path}: {run.stderr}")
            if "Binary files" in run.stdout:
                raise SystemExit(f"{path}: binary files differ; name text paths only")
            out.append(_strip_tree_names(run.stdout))
        return "".join(out)


def _strip_tree_names(diff: str) -> str:
    """Headers of `git diff --no-index a/P b/P` with the tree folders dropped: a/a/P -> a/P, b/b/P -> b/P; a file
    only one release has is named after that tree on both sides of its `diff --git` line (a/b/P b/b/P), so there
    either tree's name is dropped."""
    def fix(line: str) -> str:
        if line.startswith("diff --git "):
            _, _, old, new = line.split(" ", 3)
            return "diff --git a/%s b/%s" % (old[4:], new[4:])
        if line.startswith(("--- a/", "+++ b/")):
            return line[:4] + line[4] + "/" + line[8:]
        return line
    return "".join(fix(line) for line in diff.splitlines(keepends=True))


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__.splitlines()[2])
    sys.stdout.write(release_diff(sys.argv[1], sys.argv[2], sys.argv[3:]))
