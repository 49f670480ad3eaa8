import argparse
import sys

from todo import storage


def main(argv):
    p = argparse.ArgumentParser(prog="todo")
    p.add_argument("--file", default="todo.txt")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("add").add_argument("title")
    sub.add_parser("done").add_argument("id", type=int)
    ls = sub.add_parser("list")
    ls.add_argument("--pending", action="store_true", help="only items not done")
    args = p.parse_args(argv)
    items = storage.load(args.file)
    if args.cmd == "add":
        items.append({"id": len(items) + 1, "title": args.title, "done": False})
        storage.save(args.file, items)
    elif args.cmd == "done":
        matches = [i for i in items if i["id"] == args.id]
        if not matches:
            print(f"no item {args.id}", file=sys.stderr)
            return 1
        matches[0]["done"] = True
        storage.save(args.file, items)
    else:
        for item in items:
            if args.pending and item["done"]:
                continue
            print(f"{'[x]' if item['done'] else '[ ]'} {item['id']}. {item['title']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
