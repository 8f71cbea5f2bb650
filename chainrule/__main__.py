"""Command line: ``python -m chainrule {tour,train} [options]``."""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "tour": ("chainrule.tour", "a guided tour of the seeds: live code, measured figures"),
    "train": ("chainrule.train", "train an MLP/CNN on the embedded digits, or a GPT on embedded text"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: python -m chainrule {" + ",".join(COMMANDS) + "} [options]\n")
        for name, (_, what) in COMMANDS.items():
            print(f"  {name:8s} {what}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
