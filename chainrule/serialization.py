"""``cr.save`` / ``cr.load``: state dicts as ``.npz`` files that never run code when loaded.

A file holds the arrays (``a0``, ``a1``, ...) plus ``__chainrule__``: a JSON manifest of the nested
structure (dicts, lists, tuples, numbers, strings, None) and a SHA-256 digest of the manifest and
every array. NumPy loads it with ``allow_pickle=False``; a truncated, corrupted or edited file fails
the digest (or the zip check) and raises ``SerializationError`` before anything is returned. The
digest detects accidents and edits, not a forger who recomputes it.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from typing import Any

from ._backend import np
from .errors import ChainruleError
from .tensor import Tensor

FORMAT = "chainrule-npz-1"
_MANIFEST = "__chainrule__"


class SerializationError(ChainruleError, ValueError):
    """A file that ``cr.load`` refuses: not written by ``cr.save``, truncated, edited or pickled."""


def _exotic(dtype: np.dtype) -> bool:
    return dtype.kind == "V" or dtype.type.__module__ == "ml_dtypes"


def _encode(obj: Any, arrays: dict) -> Any:
    if isinstance(obj, (Tensor, np.ndarray, np.generic)):
        arr = np.asarray(obj.data if isinstance(obj, Tensor) else obj)
        if arr.dtype.kind == "O":
            raise SerializationError("cr.save: object arrays cannot be saved without pickle; convert "
                                     "to a numeric dtype first")
        name = f"a{len(arrays)}"
        dtype = arr.dtype
        if _exotic(dtype):
            arr = arr.view(f"u{dtype.itemsize}")
        arrays[name] = np.ascontiguousarray(arr)
        return {"array": name, "dtype": str(dtype), "tensor": isinstance(obj, Tensor),
                "scalar": isinstance(obj, np.generic)}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise SerializationError(f"cr.save: dict keys must be str or int, got {k!r}")
            items.append([k, _encode(v, arrays)])
        return {"dict": items}
    if isinstance(obj, (list, tuple)):
        return {"list" if isinstance(obj, list) else "tuple": [_encode(v, arrays) for v in obj]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    raise SerializationError(f"cr.save: cannot save a {type(obj).__name__}; save state dicts "
                             f"(nested dicts/lists of tensors, arrays, numbers and strings), e.g. "
                             f"model.state_dict() or optimizer.state_dict()")


def _digest(manifest: bytes, arrays: dict) -> str:
    h = hashlib.sha256(manifest)
    for name in sorted(arrays):
        a = arrays[name]
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def save(obj: Any, path: str | os.PathLike) -> None:
    """Write a state dict (nested dicts/lists of tensors, arrays, numbers, strings) to ``path``.

    >>> import chainrule as cr, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.npz")
    >>> cr.save({"w": cr.tensor([1.0, 2.0]), "step": 3}, path)
    >>> cr.load(path)
    {'w': tensor([1., 2.]), 'step': 3}
    """
    arrays: dict = {}
    tree = _encode(obj, arrays)
    manifest = json.dumps({"format": FORMAT, "tree": tree}).encode()
    header = json.dumps({"manifest": manifest.decode(), "sha256": _digest(manifest, arrays)})
    arrays[_MANIFEST] = np.frombuffer(header.encode(), dtype=np.uint8)
    with open(os.fspath(path), "wb") as f:
        np.savez_compressed(f, **arrays)


def _decode(node: Any, arrays: dict) -> Any:
    if "array" in node:
        arr = arrays[node["array"]]
        dtype = np.dtype(_dtype_by_name(node["dtype"]))
        if arr.dtype != dtype:
            arr = arr.view(dtype)
        if node.get("scalar"):
            return arr[()]
        return Tensor(arr) if node["tensor"] else arr
    if "dict" in node:
        return {k: _decode(v, arrays) for k, v in node["dict"]}
    if "list" in node:
        return [_decode(v, arrays) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays) for v in node["tuple"])
    return node["value"]


def _dtype_by_name(name: str) -> Any:
    from . import _dtypes
    for d in (_dtypes.bfloat16, _dtypes.float8_e4m3fn, _dtypes.float8_e5m2):
        if str(d) == name:
            return d
    return name


def load(path: str | os.PathLike) -> Any:
    """Read a file written by ``cr.save``; refuses pickles and truncated or edited files.

    >>> import chainrule as cr, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "bad.npz")
    >>> _ = open(path, "wb").write(b"not a zip")
    >>> cr.load(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    chainrule.serialization.SerializationError: cr.load: ...
    """
    path = os.fspath(path)
    where = f"cr.load: {path!r}"
    try:
        f = np.load(path, allow_pickle=False)
        if not hasattr(f, "files"):
            raise SerializationError(f"{where} is a single .npy array, not a file written by cr.save")
        with f:
            if _MANIFEST not in f.files:
                raise SerializationError(f"{where} has no chainrule manifest: it was not written by "
                                         f"cr.save (for a plain .npz use numpy.load)")
            arrays = {n: f[n] for n in f.files}
    except SerializationError:
        raise
    except FileNotFoundError:
        raise
    except ValueError as e:
        if "pickle" in str(e):
            raise SerializationError(f"{where} contains pickled data, which cr.load never loads (it "
                                     f"could run code); re-save the state with cr.save") from None
        raise SerializationError(f"{where} is not a valid cr.save file ({e}); it may be truncated or "
                                 f"corrupted") from None
    except (zipfile.BadZipFile, OSError, EOFError, KeyError, zipfile.LargeZipFile) as e:
        raise SerializationError(f"{where} is truncated or corrupted ({type(e).__name__}: {e}); "
                                 f"write it again with cr.save") from None
    try:
        header = json.loads(arrays.pop(_MANIFEST).tobytes().decode())
        manifest = header["manifest"].encode()
        digest = header["sha256"]
        tree = json.loads(manifest)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise SerializationError(f"{where}: the manifest is unreadable; the file was edited or "
                                 f"corrupted") from None
    if tree.get("format") != FORMAT:
        raise SerializationError(f"{where}: unknown format {tree.get('format')!r}; expected {FORMAT!r}")
    if _digest(manifest, arrays) != digest:
        raise SerializationError(f"{where}: the SHA-256 digest does not match the contents; the file "
                                 f"was modified or corrupted after cr.save wrote it. Nothing was loaded")
    return _decode(tree["tree"], arrays)
