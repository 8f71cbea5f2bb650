"""Print chainrule's size: lines per module and the number of primitives (a budget you can see)."""
from __future__ import annotations

import pathlib

root = pathlib.Path(__file__).resolve().parent.parent / "chainrule"
total = 0
for path in sorted(root.rglob("*.py")):
    n = sum(1 for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#"))
    total += n
    print(f"{n:6d}  {path.relative_to(root.parent)}")
print(f"{total:6d}  total lines of code")
try:
    import chainrule
    print(f"{len(chainrule.PRIMITIVES):6d}  primitives in the op table")
except ImportError:
    pass
