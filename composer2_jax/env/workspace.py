"""A task's starting repository written from its files (relative path → text): what an env worker imports into a
sandbox for a generated task (rl/services/env_worker.py), and what tests build their small repositories with."""

from __future__ import annotations

import os


def make_repo(root: str, files: dict[str, str]) -> str:
    """Write a small repository (relative path -> text) under root; returns root."""
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root
