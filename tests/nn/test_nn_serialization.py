"""cr.save / cr.load: round trips, and refusal of pickles, truncated and edited files."""
import io
import json
import pickle
import re
import struct
import sys
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

import chainrule as cr
from chainrule import nn


def test_round_trip_nested_structure(tmp_path):
    obj = {"model": {"w": cr.tensor([[1.0, 2.0]]), "b": np.arange(3, dtype=np.int32)},
           "opt": {"state": {0: {"step": 4, "m": np.ones(2)}}, "groups": [{"lr": 0.1, "betas": (0.9, 0.99),
                                                                          "nesterov": False}]},
           "bf16": cr.tensor([1.5, -2.0], dtype=cr.bfloat16), "name": "run-1", "none": None,
           "scalar": np.float32(2.5), "inf": float("inf")}
    cr.save(obj, tmp_path / "a.npz")
    back = cr.load(tmp_path / "a.npz")
    assert isinstance(back["model"]["w"], cr.Tensor) and isinstance(back["model"]["b"], np.ndarray)
    np.testing.assert_array_equal(back["model"]["w"].data, [[1.0, 2.0]])
    assert back["model"]["b"].dtype == np.int32
    assert back["opt"]["state"][0]["step"] == 4 and list(back["opt"]["state"]) == [0]
    assert back["opt"]["groups"][0] == {"lr": 0.1, "betas": (0.9, 0.99), "nesterov": False}
    assert back["bf16"].dtype == cr.bfloat16
    np.testing.assert_array_equal(back["bf16"].data.astype(np.float32), [1.5, -2.0])
    assert back["name"] == "run-1" and back["none"] is None and back["inf"] == float("inf")
    assert back["scalar"] == np.float32(2.5) and back["scalar"].dtype == np.float32


def test_model_round_trip(tmp_path):
    a = nn.Sequential(nn.Linear(3, 4, generator=np.random.default_rng(1)), nn.LayerNorm(4))
    b = nn.Sequential(nn.Linear(3, 4, generator=np.random.default_rng(2)), nn.LayerNorm(4))
    cr.save(a.state_dict(), tmp_path / "m.npz")
    b.load_state_dict(cr.load(tmp_path / "m.npz"))
    x = cr.ones((2, 3))
    np.testing.assert_array_equal(a(x).data, b(x).data)


def _weights(m):
    return [p.data.copy() for p in m.parameters()]


def test_refuses_pickle_files_and_leaves_model_untouched(tmp_path):
    model = nn.Linear(2, 2)
    before = _weights(model)
    path = tmp_path / "evil.npz"
    with open(path, "wb") as f:
        pickle.dump({"weight": np.zeros((2, 2)), "bias": np.zeros(2)}, f)
    with pytest.raises(cr.SerializationError, match="pickled data"):
        model.load_state_dict(cr.load(path))
    obj_path = tmp_path / "objects.npz"
    np.savez(obj_path, __chainrule__=np.zeros(3, np.uint8), a0=np.array([object()], dtype=object))
    with pytest.raises(cr.SerializationError, match="pickled data"):
        cr.load(obj_path)
    for a, b in zip(before, _weights(model)):
        np.testing.assert_array_equal(a, b)


def test_refuses_truncated_and_tampered_files(tmp_path):
    model = nn.Linear(3, 3)
    before = _weights(model)
    good = tmp_path / "good.npz"
    cr.save({k: v.data + 1 for k, v in model.state_dict().items()}, good)
    raw = good.read_bytes()
    truncated = tmp_path / "trunc.npz"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(cr.SerializationError, match="truncated or corrupted"):
        model.load_state_dict(cr.load(truncated))
    tampered = tmp_path / "tampered.npz"                     # a valid zip whose weight was edited
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(tampered, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "a0.npy":
                arr = np.load(__import__("io").BytesIO(data))
                arr[0, 0] += 1
                buf = __import__("io").BytesIO()
                np.save(buf, arr)
                data = buf.getvalue()
            zout.writestr(item, data)
    with pytest.raises(cr.SerializationError, match="digest does not match"):
        model.load_state_dict(cr.load(tampered))
    plain = tmp_path / "plain.npz"
    np.savez(plain, weight=np.zeros((3, 3)))
    with pytest.raises(cr.SerializationError, match="not written by cr.save"):
        cr.load(plain)
    for a, b in zip(before, _weights(model)):
        np.testing.assert_array_equal(a, b)
    model.load_state_dict(cr.load(good))                     # the intact file still loads
    np.testing.assert_array_equal(model.weight.data, before[0] + 1)


def test_save_refuses_unsupported_objects(tmp_path):
    with pytest.raises(cr.SerializationError, match="cannot save a Linear"):
        cr.save({"m": nn.Linear(1, 1)}, tmp_path / "x.npz")
    with pytest.raises(cr.SerializationError, match="keys must be str or int"):
        cr.save({(1, 2): 3}, tmp_path / "x.npz")


# ----- cr.load on hostile files: limits before inflating, and only SerializationError -----

def _npy_header(shape, descr="<f4"):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _head(tree, sha256="0" * 64):
    return json.dumps({"manifest": json.dumps({"format": cr.serialization.FORMAT, "tree": tree}),
                       "sha256": sha256}).encode()


def _raw_zip(path, members):
    """Write a zip by hand from ``(name, deflated, declared_size, crc)``, so a test can make it lie."""
    local, central = bytearray(), bytearray()
    for name, data, size, crc in members:
        n = name.encode()
        extra = struct.pack("<HHQQ", 1, 16, size, len(data))   # zip64: sizes past 4 GiB
        central += struct.pack("<4s6H3L5HLL", b"PK\1\2", 45, 45, 0, 8, 0, 0, crc, 2**32 - 1, 2**32 - 1,
                               len(n), len(extra), 0, 0, 0, 0, len(local)) + n + extra
        local += struct.pack("<4s5H3L2H", b"PK\3\4", 45, 0, 8, 0, 0, crc, 2**32 - 1, 2**32 - 1, len(n),
                             len(extra)) + n + extra + data
    path.write_bytes(bytes(local + central) + struct.pack("<4s4H2LH", b"PK\5\6", 0, 0, len(members),
                                                          len(members), len(central), len(local), 0))


def _deflate(data=b""):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _zeros_bomb(path, shape, declared, mib=200, sha256="0" * 64):
    """``mib`` MiB of deflated float32 zeros behind a header of ``shape``; ~1 KB per MiB on disk."""
    header = _npy_header(shape)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(bytes(2**20)) + c.flush(zlib.Z_FULL_FLUSH)   # full flush: blocks concatenate
    stream = first + block * mib + c.flush()
    crc = zlib.crc32(header)                                 # of what the directory declares
    for pos in range(0, declared, 2**20):
        crc = zlib.crc32(bytes(min(2**20, declared - pos)), crc)
    tree = {"dict": [["w", {"array": "a0", "dtype": "float32", "tensor": True, "scalar": False}]]}
    manifest = _npy(np.frombuffer(_head(tree, sha256), np.uint8))
    _raw_zip(path, [("a0.npy", stream, declared + len(header), crc),
                    ("__chainrule__.npy", _deflate(manifest), len(manifest), zlib.crc32(manifest))])


def _peak_load(path, **kw):
    """(what cr.load raised or returned, tracemalloc peak in bytes)."""
    tracemalloc.start()
    try:
        out = cr.load(path, **kw)
    except cr.SerializationError as e:
        out = e
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return out, peak


@pytest.mark.parametrize("case", ["over_limit", "directory_lies_small", "header_lies_small"])
def test_zip_bomb_is_refused_before_inflating(tmp_path, case):
    path = tmp_path / "bomb.npz"                            # 200 MiB of zeros in ~210 KB
    n = 200 * 2**20 // 4
    shape, declared, kw, match = {
        "over_limit": ((n,), 4 * n, {"max_bytes": 64 * 2**20}, r"holds 200\.0 MiB once inflated \(largest: "
                       r"member 'a0\.npy', 200\.0 MiB\), over max_bytes=67108864\. Nothing was inflated"),
        "directory_lies_small": ((n,), 400, {}, r"member 'a0\.npy': the zip directory says 528 bytes but "
                                 r"the \.npy header declares shape \(52428800,\) of float32, 209715328"),
        "header_lies_small": ((100,), 4 * n, {}, r"member 'a0\.npy': the zip directory says 209715328 "
                              r"bytes but the \.npy header declares shape \(100,\) of float32, 528 bytes"),
    }[case]
    _zeros_bomb(path, shape, declared)
    assert path.stat().st_size < 300_000
    err, peak = _peak_load(path, **kw)
    assert isinstance(err, cr.SerializationError)
    assert re.search(match, str(err)) and "bomb.npz" in str(err), str(err)
    assert peak < 2 * 2**20, f"cr.load allocated {peak / 2**20:.1f} MiB before refusing"


def test_load_inflates_no_more_than_the_directory_declares(tmp_path):
    # 200 MiB of zeros follow, but the directory and the header say 100 floats: only those are read.
    tree = {"dict": [["w", {"array": "a0", "dtype": "float32", "tensor": True, "scalar": False}]]}
    digest = cr.serialization._digest(json.dumps({"format": cr.serialization.FORMAT, "tree": tree}).encode(),
                                      {"a0": np.zeros(100, np.float32)})
    _zeros_bomb(tmp_path / "tail.npz", (100,), 400, sha256=digest)
    out, peak = _peak_load(tmp_path / "tail.npz")
    assert not isinstance(out, Exception), out
    np.testing.assert_array_equal(out["w"].data, np.zeros(100, np.float32))
    assert peak < 2 * 2**20


@pytest.mark.parametrize("declared", [None, 4096])
def test_huge_declared_shape_is_refused_without_memory_error(tmp_path, declared):
    path = tmp_path / "huge.npz"
    shape = (2**40, 2**20)                                  # 4 EiB of float32
    header = _npy_header(shape)
    _raw_zip(path, [("a0.npy", _deflate(header), declared or 4 * 2**60, zlib.crc32(header)),
                    ("__chainrule__.npy", _deflate(m := _npy(np.frombuffer(_head(
                        {"array": "a0", "dtype": "float32", "tensor": False}), np.uint8))), len(m),
                     zlib.crc32(m))])
    with pytest.raises(cr.SerializationError) as e:
        cr.load(path)
    msg = str(e.value)
    assert "huge.npz" in msg and "a0.npy" in msg
    if declared is None:
        assert f"over max_bytes={cr.serialization.MAX_BYTES}" in msg and "pass a larger max_bytes" in msg
    else:
        assert "the zip directory says 4096 bytes" in msg and "(1099511627776, 1048576) of float32" in msg


def _member_data_span(path, member):
    """Where a member's compressed bytes lie in the file."""
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    off = info.header_offset
    name_len, extra_len = struct.unpack("<HH", raw[off + 26:off + 30])
    start = off + 30 + name_len + extra_len
    return start, start + info.compress_size


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_flipped_byte_in_compressed_data_is_a_serialization_error(tmp_path, where):
    good = tmp_path / "good.npz"
    cr.save({"w": np.random.default_rng(0).standard_normal(4000)}, good)
    start, stop = _member_data_span(good, "a0.npy")
    raw = bytearray(good.read_bytes())
    raw[start + int(where * (stop - start))] ^= 0xFF
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(cr.SerializationError,
                       match=r"flipped\.npz', member 'a0\.npy': truncated or corrupted .*(Error -3|CRC-32)"):
        cr.load(bad)


def test_every_flipped_byte_or_truncation_is_refused_or_harmless(tmp_path):
    state = {"w": cr.tensor(np.linspace(-1, 1, 8, dtype=np.float32)), "b": np.arange(3), "step": 3}
    good = tmp_path / "good.npz"
    cr.save(state, good)
    raw = good.read_bytes()
    bad = tmp_path / "bad.npz"
    rng = np.random.default_rng(0)
    variants = [raw[:n] for n in range(0, len(raw), 7)]
    for i in rng.choice(len(raw), 150, replace=False):
        b = bytearray(raw)
        b[i] ^= int(rng.integers(1, 256))
        variants.append(bytes(b))
    refused = 0
    for data in variants:
        bad.write_bytes(data)
        try:
            out = cr.load(bad)
        except cr.SerializationError as e:
            assert "bad.npz" in str(e)
            refused += 1
        else:                                                # a flip zip ignores (a date, an attribute)
            np.testing.assert_array_equal(out["w"].data, state["w"].data)
            np.testing.assert_array_equal(out["b"], state["b"])
            assert out["step"] == 3
    assert refused > len(variants) // 2


_A0 = {"array": "a0", "dtype": "float32", "tensor": True, "scalar": False}


def _outer(manifest, sha256=""):
    return json.dumps({"manifest": manifest, "sha256": sha256}).encode()


_FORGED = {
    "not_json": (b"{not json", "invalid manifest: Expecting property name"),
    "not_utf8": (b"\xff\xfe{}", "invalid manifest: 'utf-8' codec can't decode"),
    "header_a_list": (b"[1, 2]", "expected {'manifest': str, 'sha256': str}, found [1, 2]"),
    "header_no_sha256": (json.dumps({"manifest": "{}"}).encode(), "expected {'manifest': str, 'sha256'"),
    "manifest_not_str": (_outer(5), "found {'manifest': 5"),
    "manifest_not_json": (_outer("{"), "invalid manifest: Expecting"),
    "wrong_format": (_outer(json.dumps({"format": "x", "tree": _A0})),
                     "expected {'format': 'chainrule-npz-1', 'tree': ...}, found {'format': 'x'"),
    "no_tree": (_outer(json.dumps({"format": "chainrule-npz-1"})),
                "expected {'format': 'chainrule-npz-1', 'tree': ...}"),
    "node_not_object": (_head(5), "tree: expected an object with one key of array/dict/list/tuple/value, "
                        "found 5"),
    "node_two_kinds": (_head({"list": [], "value": 1}), "tree: expected an object with one key"),
    "missing_tensor": (_head({"array": "a0", "dtype": "float32"}), "tree: expected 'tensor' to be a bool, "
                       "found nothing"),
    "tensor_not_bool": (_head({**_A0, "tensor": "yes"}), "expected 'tensor' to be a bool, found 'yes'"),
    "array_name_int": (_head({**_A0, "array": 0}), "expected 'array' to be a str, found 0"),
    "scalar_not_bool": (_head({**_A0, "scalar": 1}), "expected 'scalar' to be a bool, found 1"),
    "dangling": (_head({"list": [_A0, {**_A0, "array": "a7"}]}), "tree[1] refers to array 'a7', but there "
                 "is no member 'a7.npy'"),
    "unknown_dtype": (_head({**_A0, "dtype": "float99"}), "tree: unknown dtype 'float99'"),
    "object_dtype": (_head({**_A0, "dtype": "O"}), "dtype 'O' is not one cr.save writes"),
    "dtype_mismatch": (_head({**_A0, "dtype": "float64"}), "tree: expected float64, but member 'a0.npy' "
                       "holds shape (2,) of float32"),
    "scalar_of_shape_2": (_head({**_A0, "scalar": True}), "expected a scalar float32, but member 'a0.npy' "
                          "holds shape (2,)"),
    "dict_pair": (_head({"dict": [["k"]]}), "tree.dict[0]: expected a [key, node] pair"),
    "dict_key_list": (_head({"dict": [[[1], _A0]]}), "tree.dict[0]: expected a [key, node] pair with a str "
                      "or int key, found [[1], {"),
    "dict_not_list": (_head({"dict": {"k": _A0}}), "tree: expected 'dict' to be a list"),
    "list_not_list": (_head({"list": 5}), "tree: expected 'list' to be a list, found 5"),
    "value_a_list": (_head({"list": [_A0, {"value": [1]}]}), "tree[1]: expected a number, string, bool or "
                     "null value, found [1]"),
    "referenced_twice": (_head({"list": [_A0, _A0]}), "tree[1]: array 'a0' is referenced twice"),
    "unreferenced": (_head({"value": 1}), "members ['a0.npy'] are not referenced"),
    "deep_nesting": (_outer('{"format": "chainrule-npz-1", "tree": ' + '{"list": [' * 50_000 + "]}" * 50_000
                            + "}"), "invalid manifest: maximum recursion depth exceeded"),
    "huge_int": (_outer('{"format": "chainrule-npz-1", "tree": {"value": ' + "9" * 10_000 + "}}"),
                 "invalid manifest: Exceeds the limit"),       # Python's int-digits guard (3.10.7+)
}


def _forge(path, head, arrays=None):
    arrays = {"a0": np.zeros(2, np.float32)} if arrays is None else arrays
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            zf.writestr(name + ".npy", _npy(arr))
        zf.writestr("__chainrule__.npy", _npy(np.frombuffer(head, np.uint8)))


def test_forge_helper_writes_a_loadable_file(tmp_path):
    manifest = json.dumps({"format": cr.serialization.FORMAT, "tree": _A0}).encode()
    sha = cr.serialization._digest(manifest, {"a0": np.zeros(2, np.float32)})
    _forge(tmp_path / "ok.npz", _head(_A0, sha))
    out = cr.load(tmp_path / "ok.npz")
    assert isinstance(out, cr.Tensor) and out.dtype == np.float32
    np.testing.assert_array_equal(out.data, [0.0, 0.0])


@pytest.mark.parametrize("case", sorted(_FORGED))
def test_forged_manifest_is_a_serialization_error(tmp_path, case):
    head, expected = _FORGED[case]
    if case == "huge_int" and not hasattr(sys, "get_int_max_str_digits"):
        pytest.skip("this Python has no limit on int digits")
    _forge(tmp_path / "forged.npz", head)
    with pytest.raises(cr.SerializationError) as e:
        cr.load(tmp_path / "forged.npz")
    msg = str(e.value)
    assert "forged.npz', member '__chainrule__.npy': invalid manifest: " in msg, msg
    assert expected in msg, msg
    assert msg.endswith("write it again with cr.save")


@pytest.mark.parametrize("case", ["empty", "random", "directory", "npy", "truncated", "no_central_dir",
                                  "stored_fortran", "duplicate_member", "extra_member", "bzip2"])
def test_other_bad_files_are_serialization_errors(tmp_path, case):
    path = tmp_path / "bad.npz"
    good = tmp_path / "good.npz"
    cr.save({"w": np.arange(6.0).reshape(2, 3)}, good)
    raw = good.read_bytes()
    expected = {
        "empty": "is not a file written by cr.save: it is empty",
        "random": "is not a file written by cr.save: it is not a zip archive",
        "directory": "is a directory; pass the path of a file written by cr.save",
        "npy": "is a single .npy array, not a file written by cr.save",
        "truncated": "is truncated or corrupted (BadZipFile",
        "no_central_dir": "is truncated or corrupted (BadZipFile",
        "stored_fortran": "member 'a0.npy': a Fortran-order float64 array of shape (2, 3), which cr.save "
                          "never writes",
        "duplicate_member": "member 'a0.npy' appears twice",
        "extra_member": "member 'notes.txt' is not a .npy array",
        "bzip2": "member 'a0.npy' uses compression method 12 (cr.save writes deflate)",
    }[case]
    if case == "empty":
        path.write_bytes(b"")
    elif case == "random":
        path.write_bytes(np.random.default_rng(0).bytes(5000))
    elif case == "directory":
        path.mkdir()
    elif case == "npy":
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    elif case == "truncated":
        path.write_bytes(raw[:-30])
    elif case == "no_central_dir":
        path.write_bytes(raw[:raw.index(b"PK\1\2")])
    else:
        with zipfile.ZipFile(good) as zin, zipfile.ZipFile(path, "w") as zout:
            for item in zin.infolist():
                data = zin.read(item.filename)
                if case == "stored_fortran" and item.filename == "a0.npy":
                    data = _npy(np.asfortranarray(np.arange(6.0).reshape(2, 3)))
                if case == "bzip2" and item.filename == "a0.npy":
                    item.compress_type = zipfile.ZIP_BZIP2
                zout.writestr(item, data)
                if case == "duplicate_member" and item.filename == "a0.npy":
                    with pytest.warns(UserWarning, match="Duplicate name"):
                        zout.writestr(item, data)
            if case == "extra_member":
                zout.writestr("notes.txt", "hello")
    with pytest.raises(cr.SerializationError) as e:
        cr.load(path)
    assert expected in str(e.value) and path.name in str(e.value), str(e.value)


def test_missing_file_stays_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        cr.load(tmp_path / "nope.npz")


def test_max_bytes_is_adjustable(tmp_path, monkeypatch):
    path = tmp_path / "m.npz"
    state = {"w": cr.tensor(np.arange(1000, dtype=np.float32)), "b": np.ones(10)}
    cr.save(state, path)
    with zipfile.ZipFile(path) as zf:
        total = sum(i.file_size for i in zf.infolist())     # what max_bytes bounds: inflated members
    with pytest.raises(cr.SerializationError) as e:
        cr.load(path, max_bytes=total - 1)
    assert (f"m.npz' holds {total} bytes once inflated (largest: member 'a0.npy', 4128 bytes), over "
            f"max_bytes={total - 1}. Nothing was inflated. If you trust the file, pass a larger max_bytes"
            in str(e.value))
    np.testing.assert_array_equal(cr.load(path, max_bytes=total)["w"].data, np.arange(1000))
    monkeypatch.setattr(cr.serialization, "MAX_BYTES", total - 1)   # the module-wide default
    with pytest.raises(cr.SerializationError, match=f"over max_bytes={total - 1}"):
        cr.load(path)
    np.testing.assert_array_equal(cr.load(path, max_bytes=10 * total)["b"], np.ones(10))
    for bad in (-1, 1.5, "big", True):
        with pytest.raises(TypeError, match="max_bytes must be a non-negative int"):
            cr.load(path, max_bytes=bad)


_DTYPES = [np.float16, np.float32, np.float64, cr.bfloat16, cr.float8_e4m3fn, cr.float8_e5m2, np.int8,
           np.int32, np.int64, np.uint8, np.uint64, np.bool_, np.complex64, np.complex128, ">f4", ">i8"]


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: str(np.dtype(d)))
def test_round_trip_is_bit_exact_for_every_dtype(tmp_path, dtype):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 256, 12 * dtype.itemsize, dtype=np.uint8)
    arr = bits.view(dtype).reshape(3, 4) if dtype.kind != "b" else (bits[:12] & 1).astype(bool).reshape(3, 4)
    state = {"t": cr.Tensor(arr), "a": arr, "zero_d": arr.reshape(-1)[:1].reshape(()),
             "empty": arr[:0], "scalar": arr[0, 0]}
    cr.save(state, tmp_path / "d.npz")
    back = cr.load(tmp_path / "d.npz")
    assert isinstance(back["t"], cr.Tensor) and isinstance(back["a"], np.ndarray)
    assert isinstance(back["scalar"], np.generic) and back["scalar"].dtype == state["scalar"].dtype
    for key in state:
        got = back[key].data if key == "t" else np.asarray(back[key])
        want = np.asarray(state[key].data if key == "t" else state[key])
        assert got.dtype == want.dtype and got.shape == want.shape, key
        assert got.tobytes() == want.tobytes(), key                # bit-exact, NaN payloads included


def test_failed_loads_leave_the_model_untouched(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    before = _weights(model)
    good = tmp_path / "good.npz"
    cr.save({k: v.data + 1 for k, v in model.state_dict().items()}, good)
    raw = good.read_bytes()
    start, stop = _member_data_span(good, "a2.npy")               # the third of four arrays
    flipped = bytearray(raw)
    flipped[(start + stop) // 2] ^= 0xFF
    bads = {"flipped": bytes(flipped), "truncated": raw[: len(raw) - 100], "garbage": b"\0" * 100}
    for name, data in bads.items():
        (tmp_path / f"{name}.npz").write_bytes(data)
    _zeros_bomb(tmp_path / "bomb.npz", (50 * 2**20 // 4,), 50 * 2**20, mib=50)
    _forge(tmp_path / "forged.npz", _FORGED["dangling"][0])
    for path in sorted(tmp_path.glob("*.npz")):
        if path != good:
            with pytest.raises(cr.SerializationError):
                model.load_state_dict(cr.load(path, max_bytes=2**20))
    for a, b in zip(before, _weights(model)):
        np.testing.assert_array_equal(a, b)
    model.load_state_dict(cr.load(good))
    np.testing.assert_array_equal(model[0].weight.data, before[0] + 1)
