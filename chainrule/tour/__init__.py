"""``python -m chainrule tour``: each section runs live code for one idea of the seeds and prints
what it measured. Sections live in small modules and register themselves with ``@section``."""
from __future__ import annotations

import argparse
import time

# Section modules. Each registers its sections on import; ORDER follows the seeds' storyline.
from chainrule.tour import core, memory, modes, precision, programs, speed, training  # noqa: F401
from chainrule.tour._sections import SECTIONS, Context


def run(fast: bool = False, out: str | None = None, only: list[str] | None = None) -> None:
    """Run the tour (all sections, or those whose key is in ``only``)."""
    ctx = Context(fast=fast, out=out)
    chosen = [s for s in SECTIONS if not only or s.key in only]
    start = time.perf_counter()
    for i, s in enumerate(chosen, 1):
        ctx.say(f"\n[{i}/{len(chosen)}] {s.title}\n    seed idea: {s.seed}\n")
        s.run(ctx)
    ctx.say(f"\ntour finished: {len(chosen)} sections in {time.perf_counter() - start:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chainrule tour", description=__doc__)
    parser.add_argument("--fast", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--out", help="write PNG plots here (needs the 'plot' extra)")
    parser.add_argument("--only", nargs="*", help="section keys to run: " +
                        ", ".join(s.key for s in SECTIONS))
    args = parser.parse_args(argv)
    run(fast=args.fast, out=args.out, only=args.only)
    return 0


ORDER = ["graph", "reverse", "modes", "hvp", "activations", "checkpointing", "gradcheck", "training",
         "transformer", "compile", "graph_picture", "precision", "control-flow", "nan-trap", "implicit", "estimators"]
SECTIONS.sort(key=lambda s: ORDER.index(s.key) if s.key in ORDER else len(ORDER))
