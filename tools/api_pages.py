"""``python tools/api_pages.py``: write the API reference pages (``docs/api/*.md``) from the code.

One page per public namespace, listing every name of its ``__all__``: functions and classes as
mkdocstrings directives (``::: chainrule.nn.Linear``: the site renders signature and docstring from
the code), data (dtypes, tables, paths) in a table described here. ``tests/test_api_reference.py``
fails when a page differs from what this writes, or when a public name has no docstring, so a new
public name reaches the reference (and needs a docstring) before it lands.

>>> page = render("cr.integrate")
>>> "::: chainrule.scipy.integrate.odeint" in page
True
"""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
API_DIR = ROOT / "docs" / "api"

# namespace -> (module, page title); the order is the index page's
NAMESPACES = {
    "cr": ("chainrule", "the top-level namespace"),
    "cr.func": ("chainrule.func", "function transforms"),
    "cr.autograd": ("chainrule.autograd", "graph-level autograd"),
    "cr.forward_ad": ("chainrule.autograd.forward", "forward mode with dual tensors"),
    "cr.nn": ("chainrule.nn", "layers and losses"),
    "cr.nn.functional": ("chainrule.nn.functional", "functional layers"),
    "cr.nn.init": ("chainrule.nn.init", "parameter initialisation"),
    "cr.nn.utils": ("chainrule.nn.utils", "clipping, parametrizations, pruning, stateless calls"),
    "cr.optim": ("chainrule.optim", "optimizers"),
    "cr.optim.lr_scheduler": ("chainrule.optim.lr_scheduler", "learning-rate schedules"),
    "cr.linalg": ("chainrule.numpy.linalg", "linear algebra"),
    "cr.fft": ("chainrule.numpy.fft", "the FFT"),
    "cr.special": ("chainrule.scipy.special", "SciPy's special functions"),
    "cr.stats": ("chainrule.scipy.stats", "SciPy's distributions"),
    "cr.integrate": ("chainrule.scipy.integrate", "odeint"),
    "cr.distributions": ("chainrule.programs.distributions", "probability distributions"),
    "cr.estimators": ("chainrule.programs.estimators", "gradient estimators for discrete and random ops"),
    "cr.random": ("chainrule.core.random", "the random state"),
    "cr.amp": ("chainrule.amp", "mixed precision"),
    "cr.precision": ("chainrule.amp.precision", "the dtype policy and loss scaling"),
    "cr.fp8": ("chainrule.amp.fp8", "FP8 quantization"),
    "cr.data": ("chainrule.data", "datasets and loaders"),
    "cr.distributed": ("chainrule.distributed", "data parallelism over MPI"),
    "cr.viz": ("chainrule.utils.viz", "pictures of the graph"),
    "chainrule.extend": ("chainrule.extend", "the extension API: new primitives"),
}

# Public names that are data, not code: what the reference says of each (a docstring cannot)
DATA = {
    "bfloat16": "Brain float (8-bit exponent, 7-bit mantissa), from `ml_dtypes`; see the precision guide.",
    "bool_": "NumPy's `bool_`.",
    "complex64": "NumPy's `complex64`: the complex partner of float32.",
    "complex128": "NumPy's `complex128`: the complex partner of float64.",
    "float16": "NumPy's `float16` (IEEE half precision).",
    "float32": "NumPy's `float32`: the default dtype (`cr.set_default_dtype` changes it).",
    "float64": "NumPy's `float64`: the dtype of gradient checking.",
    "float8_e4m3fn": "FP8 with 4 exponent and 3 mantissa bits, no infinities (`ml_dtypes`).",
    "float8_e5m2": "FP8 with 5 exponent and 2 mantissa bits (`ml_dtypes`).",
    "int32": "NumPy's `int32`.",
    "int64": "NumPy's `int64`: the dtype of integer tensors made from Python ints.",
    "PRIMITIVES": "The op table: a dict from each primitive's name to its `Primitive` (rules, FLOPs, saves, "
                  "policies, batching); see the architecture guide.",
    "FORMATS": "The FP8 formats `quantize` accepts: `(float8_e4m3fn, float8_e5m2)`.",
    "DIGITS_PATH": "Path of the embedded UCI digits (`digits.npz`), read by `load_digits`.",
    "DEVILS_DICTIONARY_PATH": "Path of the embedded text of *The Devil's Dictionary* (gzip), read by "
                              "`load_devils_dictionary`.",
    "LinAlgError": "NumPy's `numpy.linalg.LinAlgError`, re-exported: chainrule's linear-algebra errors on the "
                   "values (singular, not positive definite, NaN) derive from it, so `except LinAlgError` works.",
    "default_generator": "The default `numpy.random.Generator` random ops draw from (`manual_seed` reseeds it).",
}

# Objects of the top-level namespace, grouped by the layer that defines them (its module's prefix)
GROUPS = [
    ("Tensors, dtypes and errors", ("chainrule.core",)),
    ("Function transforms", ("chainrule.func",)),
    ("Autograd: gradients, checkpointing, custom functions", ("chainrule.autograd",)),
    ("Programs: solvers and fixed points", ("chainrule.programs",)),
    ("Mixed precision", ("chainrule.amp",)),
    ("Saving and loading", ("chainrule.utils",)),
    ("NumPy's namespace", ("chainrule.numpy", "chainrule.ops")),
]


def module(space: str):
    """The module behind a namespace key of ``NAMESPACES``."""
    return importlib.import_module(NAMESPACES[space][0])


def public_names(space: str) -> list[str]:
    """The namespace's ``__all__``, less the sub-namespaces (each has its own page)."""
    mod = module(space)
    return [n for n in mod.__all__ if not inspect.ismodule(getattr(mod, n))]


def is_data(obj) -> bool:
    """True for a public name the reference describes in words: data (a dtype, a table, a path), or
    a class chainrule re-exports from another library."""
    return not callable(obj) or not (getattr(obj, "__module__", "") or "").startswith("chainrule")


def _directive(modname: str, name: str) -> str:
    return f"::: {modname}.{name}\n"


def _data_table(mod, names: list[str]) -> list[str]:
    if not names:
        return []
    rows = ["| name | what it is |", "|---|---|"]
    rows += [f"| `{n}` | {DATA[n]} |" for n in names]
    return ["## Data and re-exports", "", *rows, ""]


def _first_paragraph(mod) -> str:
    doc = inspect.getdoc(mod) or ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def _group(obj) -> str:
    where = getattr(obj, "__module__", "") or ""
    for title, prefixes in GROUPS:
        if where.startswith(prefixes):
            return title
    return "Other"


def render(space: str) -> str:
    """The Markdown of one namespace's page."""
    modname, title = NAMESPACES[space]
    mod = module(space)
    names = public_names(space)
    data = sorted((n for n in names if is_data(getattr(mod, n))), key=str.lower)
    code = sorted((n for n in names if n not in data), key=str.lower)
    out = [f"# `{space}`: {title}", "", _first_paragraph(mod), "",
           f"{len(names)} public names (`{modname}.__all__`). Generated by `python tools/api_pages.py`; "
           f"each entry's signature and text come from the code.", ""]
    subs = [n for n in mod.__all__ if inspect.ismodule(getattr(mod, n))]
    if subs:
        links = [f"[`{space}.{n}`]({space}.{n}.md)" if f"{space}.{n}" in NAMESPACES else f"`{space}.{n}`"
                 for n in sorted(subs)]
        out += ["Sub-namespaces: " + ", ".join(links) + ".", ""]
    if space == "cr":
        for group, _ in [*GROUPS, ("Other", ())]:
            members = [n for n in code if _group(getattr(mod, n)) == group]
            if members:
                out += [f"## {group}", "", *(_directive(modname, n) for n in members)]
    else:
        out += ["## Functions and classes", "", *(_directive(modname, n) for n in code)]
    out += _data_table(mod, data)
    return "\n".join(out).rstrip() + "\n"


def render_index() -> str:
    """The reference's front page: one row per namespace."""
    rows = ["| namespace | what | names |", "|---|---|---|"]
    for space, (_, title) in NAMESPACES.items():
        rows.append(f"| [`{space}`]({space}.md) | {title} | {len(public_names(space))} |")
    return "\n".join([
        "# API reference", "",
        "Every public name of chainrule, one page per namespace, generated from the code by "
        "`python tools/api_pages.py` (signatures and docstrings as the code has them; each "
        "docstring's example runs as a doctest in the test suite). `cr` is `import chainrule as cr`; "
        "`cr.ops` (the op table's modules) is internal: its primitives reach the public functions "
        "listed here, and the [architecture guide](../architecture.md) describes it.", "",
        *rows, ""])


def pages() -> dict[Path, str]:
    """Every page of the reference, by path."""
    out = {API_DIR / "index.md": render_index()}
    out.update({API_DIR / f"{space}.md": render(space) for space in NAMESPACES})
    return out


def main(argv: list[str] | None = None) -> int:
    API_DIR.mkdir(parents=True, exist_ok=True)
    want = pages()
    for stale in set(API_DIR.glob("*.md")) - set(want):
        stale.unlink()
    for path, text in want.items():
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(want)} pages to {API_DIR.relative_to(ROOT)}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
