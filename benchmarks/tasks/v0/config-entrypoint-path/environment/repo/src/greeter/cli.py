import argparse
import sys

from greeter import __version__


def main(argv=None):
    p = argparse.ArgumentParser(prog="greeter")
    p.add_argument("--version", action="version", version=f"greeter {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    hello = sub.add_parser("hello")
    hello.add_argument("name")
    hello.add_argument("--shout", action="store_true")
    args = p.parse_args(argv)
    text = f"Hello, {args.name}!"
    print(text.upper() if args.shout else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
