"""``cr.save`` / ``cr.load``: state dicts as ``.npz`` files that never run code when loaded.

A file holds the arrays (``a0``, ``a1``, ...) plus ``__chainrule__``: a JSON manifest of the nested
structure (dicts, lists, tuples, numbers, strings, None) and a SHA-256 digest of the manifest and
every array. ``cr.load`` reads the zip directory and every ``.npy`` header first and checks them
against the manifest and the size limit (``max_bytes``, default ``MAX_BYTES``) before inflating any
data; then it reads each array once, in chunks, into its final buffer while hashing it, and builds
the result only when the digest matches. Pickles and object arrays are never loaded. Every refusal
is a ``SerializationError`` naming the file, the member and the fix. The digest detects accidents
and edits, not a forger who recomputes it; the size limit is what bounds a forged file's cost.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import zipfile
import zlib
from typing import Any

from chainrule.core import _dtypes
from chainrule.core._backend import np
from chainrule.core.errors import ChainruleError
from chainrule.core.tensor import Tensor

FORMAT = "chainrule-npz-1"
_MANIFEST = "__chainrule__"
MAX_BYTES = 4 * 2**30          # default of load(max_bytes=): all members, inflated
# JSON becomes up to ~20x its size in Python objects; cr.save writes ~100 bytes per array.
_MAX_MANIFEST = 16 * 2**20
_CHUNK = 2**20
# What zipfile, zlib and the .npy header parser raise on damaged or forged bytes.
_CORRUPT = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError,
            TypeError, struct.error, NotImplementedError, UnicodeError, RecursionError)


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
        arrays[name] = np.ascontiguousarray(arr).reshape(arr.shape)   # ascontiguousarray makes 0-d 1-d
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
        if node.get("scalar"):                     # files before the 0-d fix store scalars as (1,)
            return arr.reshape(())[()]
        return Tensor(arr) if node["tensor"] else arr
    if "dict" in node:
        return {k: _decode(v, arrays) for k, v in node["dict"]}
    if "list" in node:
        return [_decode(v, arrays) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays) for v in node["tuple"])
    return node["value"]


def _dtype_by_name(name: str) -> Any:
    for d in (_dtypes.bfloat16, _dtypes.float8_e4m3fn, _dtypes.float8_e5m2):
        if str(d) == name:
            return d
    return name


class _Invalid(Exception):
    """A manifest that cr.save cannot have written; the message says where and what."""


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def _expect(node: dict, key: str, typ: type, at: str) -> None:
    if not isinstance(node.get(key), typ):
        found = _short(node[key]) if key in node else "nothing"
        raise _Invalid(f"{at}: expected {key!r} to be a {typ.__name__}, found {found}")


def _manifest_dtype(name: str, at: str) -> np.dtype:
    try:
        dtype = np.dtype(_dtype_by_name(name))
    except (TypeError, ValueError, SyntaxError):
        raise _Invalid(f"{at}: unknown dtype {_short(name)}") from None
    if not (dtype.type.__module__ == "ml_dtypes" or dtype.kind in "biufcmMSU" and dtype.itemsize > 0):
        raise _Invalid(f"{at}: dtype {name!r} is not one cr.save writes (numbers, bool, str, bytes, "
                       f"datetime, bfloat16/FP8)")
    return dtype


def _check_tree(node: Any, refs: dict, at: str) -> None:
    """Raise ``_Invalid`` unless ``node`` has the shape cr.save writes; collect array nodes in ``refs``."""
    kinds = [k for k in ("array", "dict", "list", "tuple", "value") if isinstance(node, dict) and k in node]
    if len(kinds) != 1:
        raise _Invalid(f"{at}: expected an object with one key of array/dict/list/tuple/value, found "
                       f"{_short(node)}")
    kind = kinds[0]
    if kind == "array":
        for key, typ in (("array", str), ("dtype", str), ("tensor", bool)):
            _expect(node, key, typ, at)
        if not isinstance(node.get("scalar", False), bool):
            raise _Invalid(f"{at}: expected 'scalar' to be a bool, found {_short(node['scalar'])}")
        if node["array"] in refs:
            raise _Invalid(f"{at}: array {node['array']!r} is referenced twice")
        refs[node["array"]] = (_manifest_dtype(node["dtype"], at), node.get("scalar", False), at)
    elif kind == "dict":
        _expect(node, "dict", list, at)
        for i, item in enumerate(node["dict"]):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                    and not isinstance(item[0], bool)):
                raise _Invalid(f"{at}.dict[{i}]: expected a [key, node] pair with a str or int key, "
                               f"found {_short(item)}")
            _check_tree(item[1], refs, f"{at}[{item[0]!r}]")
    elif kind in ("list", "tuple"):
        _expect(node, kind, list, at)
        for i, v in enumerate(node[kind]):
            _check_tree(v, refs, f"{at}[{i}]")
    elif not (node["value"] is None or isinstance(node["value"], (bool, int, float, str))):
        raise _Invalid(f"{at}: expected a number, string, bool or null value, found "
                       f"{_short(node['value'])}")


def _member_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> tuple:
    """Open a member and read only its .npy header; check it against the zip directory.

    Returns ``(dtype, shape, header_bytes)``. Reads a few KB at most, whatever the member declares.
    """
    member = f"{where}, member {info.filename!r}"
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f".npy format version {version}, expected 1.0 or 2.0")
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran_order, dtype = read(f)
            header = f.tell()
    except _CORRUPT as e:
        raise SerializationError(f"{member}: truncated or corrupted .npy header ({type(e).__name__}: "
                                 f"{e}); write the file again with cr.save") from None
    if dtype.hasobject:
        raise SerializationError(f"{member} holds an object array (pickled data), which cr.load never "
                                 f"loads (it could run code); re-save the state with cr.save")
    if fortran_order or any(n < 0 for n in shape) or not (dtype.kind in "biufcmMSU" and dtype.itemsize):
        raise SerializationError(f"{member}: a {'Fortran-order ' if fortran_order else ''}{dtype} array "
                                 f"of shape {shape}, which cr.save never writes; write the file again "
                                 f"with cr.save")
    declared = header + math.prod(shape) * dtype.itemsize
    if declared != info.file_size:
        raise SerializationError(f"{member}: the zip directory says {info.file_size} bytes but the "
                                 f".npy header declares shape {shape} of {dtype}, {declared} bytes; the "
                                 f"file was forged or corrupted, write it again with cr.save")
    return dtype, shape, header


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, header: int, out: np.ndarray,
                 sha: Any, where: str) -> None:
    """Inflate a member's data into ``out`` in chunks, feeding each chunk to ``sha`` (if given)."""
    flat = out.reshape(-1).view(np.uint8)
    try:
        with zf.open(info) as f:
            f.read(header)
            for pos in range(0, flat.size, _CHUNK):
                chunk = f.read(min(_CHUNK, flat.size - pos))
                if pos + len(chunk) < min(pos + _CHUNK, flat.size):
                    raise EOFError(f"data ends after {header + pos + len(chunk)} of {info.file_size} bytes")
                flat[pos:pos + len(chunk)] = np.frombuffer(chunk, np.uint8)
                if sha is not None:
                    sha.update(chunk)
    except _CORRUPT as e:
        raise SerializationError(f"{where}, member {info.filename!r}: truncated or corrupted data "
                                 f"({type(e).__name__}: {e}); write the file again with cr.save") from None


def _size(n: int) -> str:
    return f"{n} bytes" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def load(path: str | os.PathLike, *, max_bytes: int | None = None) -> Any:
    """Read a file written by ``cr.save``; refuses pickles, oversized, truncated or edited files.

    ``max_bytes`` bounds the bytes the file's members take once inflated (default ``MAX_BYTES`` of
    this module, 4 GiB); it is checked against the zip directory and the ``.npy`` headers before any
    data is inflated. Raise it for a larger checkpoint you trust. Every refusal is a
    ``SerializationError`` (a missing file stays ``FileNotFoundError``), and nothing is returned.

    >>> import chainrule as cr, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.npz")
    >>> cr.save({"w": cr.zeros(1000)}, path)
    >>> cr.load(path, max_bytes=1000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    chainrule.utils.serialization.SerializationError: cr.load: '...m.npz' holds 4... bytes ... over max_bytes=1000...
    >>> cr.load(path, max_bytes=10_000)["w"].shape
    (1000,)
    >>> _ = open(path, "wb").write(b"not a zip")
    >>> cr.load(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    chainrule.utils.serialization.SerializationError: cr.load: ... not a zip archive...
    """
    limit = MAX_BYTES if max_bytes is None else max_bytes
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise TypeError(f"cr.load: max_bytes must be a non-negative int, got {max_bytes!r}")
    path = os.fspath(path)
    where = f"cr.load: {path!r}"
    if os.path.isdir(path):
        raise SerializationError(f"{where} is a directory; pass the path of a file written by cr.save")
    with open(path, "rb") as f:                    # a missing file raises FileNotFoundError
        head = f.read(6)
        if head.startswith(b"\x93NUMPY"):
            raise SerializationError(f"{where} is a single .npy array, not a file written by cr.save "
                                     f"(use numpy.load)")
        if head.startswith(b"\x80"):
            raise SerializationError(f"{where} contains pickled data, which cr.load never loads (it "
                                     f"could run code); re-save the state with cr.save")
        if not head.startswith(b"PK"):
            raise SerializationError(f"{where} is not a file written by cr.save: it is "
                                     f"{'empty' if not head else 'not a zip archive'}")
        f.seek(0)
        try:
            zf = zipfile.ZipFile(f)
        except _CORRUPT as e:
            raise SerializationError(f"{where} is truncated or corrupted ({type(e).__name__}: {e}); "
                                     f"write it again with cr.save") from None
        with zf:
            return _load(zf, where, limit)


def _load(zf: zipfile.ZipFile, where: str, limit: int) -> Any:
    infos = zf.infolist()
    seen: set = set()
    if _MANIFEST + ".npy" not in {i.filename for i in infos}:
        raise SerializationError(f"{where} has no chainrule manifest: it was not written by cr.save "
                                 f"(for a plain .npz use numpy.load)")
    for info in infos:
        problem = ("appears twice" if info.filename in seen else
                   "is not a .npy array" if not info.filename.endswith(".npy") or info.is_dir() else
                   "is encrypted" if info.flag_bits & 1 else
                   f"uses compression method {info.compress_type} (cr.save writes deflate)"
                   if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) else None)
        if problem:
            raise SerializationError(f"{where}, member {info.filename!r} {problem}; the file was not "
                                     f"written by cr.save, or was edited")
        seen.add(info.filename)
    total = sum(i.file_size for i in infos)
    if total > limit:
        big = max(infos, key=lambda i: i.file_size)
        raise SerializationError(f"{where} holds {_size(total)} once inflated (largest: member "
                                 f"{big.filename!r}, {_size(big.file_size)}), over max_bytes={limit}. "
                                 f"Nothing was inflated. If you trust the file, pass a larger max_bytes "
                                 f"to cr.load")
    headers = {i.filename[:-4]: (i, *_member_header(zf, i, where)) for i in infos}
    manifest, digest, tree, refs = _read_manifest(zf, headers.pop(_MANIFEST), headers, where)

    sha = hashlib.sha256(manifest)
    arrays = {}
    for name in sorted(headers):                   # cr.save's digest order
        info, stored, shape, header = headers[name]
        sha.update(f"{name}|{stored.str}|{shape}|".encode())
        arrays[name] = np.empty(shape, refs[name])
        _read_member(zf, info, header, arrays[name], sha, where)
    if sha.hexdigest() != digest:
        raise SerializationError(f"{where}: the SHA-256 digest does not match the contents (recorded "
                                 f"{digest[:16]!r}..., computed {sha.hexdigest()[:16]}...); the file was "
                                 f"modified or corrupted after cr.save wrote it. Nothing was loaded; "
                                 f"write it again with cr.save")
    return _decode(tree, arrays)


def _read_manifest(zf: zipfile.ZipFile, entry: tuple, headers: dict, where: str) -> tuple:
    """Read and check the manifest against the members' headers: ``(manifest, sha256, tree, dtypes)``."""
    info, dtype, shape, header = entry
    member = f"{where}, member {info.filename!r}"
    if dtype != np.uint8 or len(shape) != 1 or info.file_size > _MAX_MANIFEST:
        raise SerializationError(f"{member}: expected the manifest as 1-D uint8 of at most "
                                 f"{_size(_MAX_MANIFEST)}, found shape {shape} of {dtype}; the file was "
                                 f"not written by cr.save, or was edited")
    raw = np.empty(shape, np.uint8)
    _read_member(zf, info, header, raw, None, where)
    try:
        head = json.loads(raw.tobytes().decode())
        if not (isinstance(head, dict) and isinstance(head.get("manifest"), str)
                and isinstance(head.get("sha256"), str)):
            raise _Invalid(f"expected {{'manifest': str, 'sha256': str}}, found {_short(head)}")
        tree = json.loads(head["manifest"])
        if not isinstance(tree, dict) or tree.get("format") != FORMAT or "tree" not in tree:
            raise _Invalid(f"expected {{'format': {FORMAT!r}, 'tree': ...}}, found {_short(tree)}")
        refs: dict = {}
        _check_tree(tree["tree"], refs, "tree")
        for name, (want, scalar, at) in refs.items():
            if name not in headers:
                raise _Invalid(f"{at} refers to array {name!r}, but there is no member {name + '.npy'!r}")
            stored, got = headers[name][1:3]
            if stored != (np.dtype(f"u{want.itemsize}") if _exotic(want) else want) \
                    or scalar and got not in ((), (1,)):
                raise _Invalid(f"{at}: expected {'a scalar ' if scalar else ''}{want}, but member "
                               f"{name + '.npy'!r} holds shape {got} of {stored}")
        unused = sorted(set(headers) - set(refs))
        if unused:
            raise _Invalid(f"members {[n + '.npy' for n in unused]} are not referenced")
    except (_Invalid, ValueError, UnicodeError, RecursionError) as e:
        raise SerializationError(f"{member}: invalid manifest: {e}; the file was edited or corrupted, "
                                 f"or not written by cr.save; write it again with cr.save") from None
    return head["manifest"].encode(), head["sha256"], tree["tree"], {n: r[0] for n, r in refs.items()}
