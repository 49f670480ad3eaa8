"""todo.txt storage: one item per line, '[x] title' or '[ ] title'; the id is the line number."""

import os


def load(path):
    if not os.path.exists(path):
        return []
    items = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line:
                items.append({"id": i, "title": line[4:], "done": line.startswith("[x]")})
    return items


def save(path, items):
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(("[x] " if item["done"] else "[ ] ") + item["title"] + "\n")
