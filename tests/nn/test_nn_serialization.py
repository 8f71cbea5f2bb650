"""cr.save / cr.load: round trips, and refusal of pickles, truncated and edited files."""
import pickle
import zipfile

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
