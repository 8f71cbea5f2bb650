"""Resampling (interpolate and Upsample, unfold/fold, pixel shuffle): against torch in float64 (outputs
and input gradients), gradchecked to second order, the modules, and the errors."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.nn import resampling as NR
from chainrule.nn.functional import resampling as R

torch = pytest.importorskip("torch")
tF = torch.nn.functional
RTOL, ATOL = 1e-10, 1e-12


def _compare(ours_fn, theirs_fn, x, rng, grad=True):
    cx, tx = cr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours_fn(cx), theirs_fn(tx)
    assert out.shape == tuple(ref.shape) and out.dtype == x.dtype
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    if grad:
        g = rng.normal(size=out.shape)
        out.backward(cr.tensor(g))
        ref.backward(torch.tensor(g))
        np.testing.assert_allclose(cx.grad.data, tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    return cx


MODES = {3: ["nearest", "nearest-exact", "linear", "area"],
         4: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"],
         5: ["nearest", "nearest-exact", "trilinear", "area"]}
SPATIAL = {3: [(7,), (1,), (5,)], 4: [(5, 7), (1, 4), (6, 3)], 5: [(3, 4, 5), (2, 1, 3)]}
RESIZES = {3: [dict(size=12), dict(size=(4,)), dict(scale_factor=2), dict(scale_factor=1.7),
               dict(scale_factor=0.6), dict(scale_factor=2.5, recompute_scale_factor=True)],
           4: [dict(size=(9, 5)), dict(size=3), dict(scale_factor=2), dict(scale_factor=(1.5, 0.75)),
               dict(scale_factor=(3, 2.3)), dict(scale_factor=(0.55, 1.6), recompute_scale_factor=True)],
           5: [dict(size=(4, 3, 7)), dict(scale_factor=2), dict(scale_factor=(1.5, 2.2, 0.8)),
               dict(scale_factor=1.3, recompute_scale_factor=True)]}


def _ids(v):
    return ",".join(f"{k}={w}" for k, w in v.items()) if isinstance(v, dict) else str(v)


@pytest.mark.parametrize("ndim", [3, 4, 5])
@pytest.mark.parametrize("align", [None, False, True], ids=["default", "align=F", "align=T"])
def test_interpolate_matches_torch(rng, ndim, align):
    for mode in MODES[ndim]:
        if align is not None and mode in ("nearest", "nearest-exact", "area"):
            continue
        for spatial in SPATIAL[ndim]:
            for kw in RESIZES[ndim]:
                x = rng.normal(size=(2, 3) + spatial)
                extra = {} if align is None else {"align_corners": align}
                try:
                    ref_out = tF.interpolate(torch.tensor(x), mode=mode, **kw, **extra)
                except RuntimeError:                  # an output size of 0: ours raises too (tested below)
                    continue
                if min(ref_out.shape) == 0:
                    continue
                # torch's nearest backward re-derives its indices with its legacy rule (and its bicubic
                # backward copies a same-size axis): compare gradients where torch agrees with its forward
                legacy = ndim == 4 and sum(ref_out.shape[2:]) <= 128
                grad = not ((mode.startswith("nearest") and not legacy and "scale_factor" in kw
                             and not kw.get("recompute_scale_factor"))
                            or (mode == "bicubic" and "scale_factor" in kw and ref_out.shape[2:] != x.shape[2:]
                                and any(a == b for a, b in zip(ref_out.shape[2:], x.shape[2:]))))
                _compare(lambda t: R.interpolate(t, mode=mode, **kw, **extra),
                         lambda t: tF.interpolate(t, mode=mode, **kw, **extra), x, rng, grad=grad)


def test_nearest_follows_torchs_two_index_rules(rng):
    # a given scale_factor (not in / out) sets the index; torch's 2-D kernel for small outputs keeps a
    # size-preserving axis as a copy, its general kernel (1-D, 3-D, large 2-D) does not
    cases = [((1, 1, 2), dict(scale_factor=2.1)), ((1, 1, 5), dict(scale_factor=1.1)),
             ((1, 2, 3, 7), dict(scale_factor=(1.3, 0.6))), ((1, 1, 3, 70), dict(scale_factor=(1.3, 1.9))),
             ((1, 1, 2, 3, 2), dict(scale_factor=(1.4, 1.0, 2.6))), ((2, 1, 10, 9), dict(size=(13, 4)))]
    for shape, kw in cases:
        x = rng.normal(size=shape)
        for mode in ("nearest", "nearest-exact"):
            _compare(lambda t: R.interpolate(t, mode=mode, **kw), lambda t: tF.interpolate(t, mode=mode, **kw),
                     x, rng, grad=False)
            # the gradient is the transpose of the forward's gather (torch's differs here)
            assert cr.gradcheck(lambda t: R.interpolate(t, mode=mode, **kw), (cr.tensor(x, requires_grad=True),),
                                modes=("rev", "fwd"))


def test_interpolate_float32_and_integer_nearest(rng):
    x = rng.normal(size=(1, 2, 5, 6)).astype(np.float32)
    for mode, kw in (("bilinear", dict(align_corners=False)), ("bicubic", dict(align_corners=True)),
                     ("nearest", {}), ("area", {})):
        out = R.interpolate(cr.tensor(x), size=(7, 4), mode=mode, **kw)
        ref = tF.interpolate(torch.tensor(x), size=(7, 4), mode=mode, **kw)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out.data, ref.numpy(), rtol=1e-5, atol=1e-6)
    u = np.arange(12, dtype=np.uint8).reshape(1, 1, 3, 4)
    np.testing.assert_array_equal(R.interpolate(cr.tensor(u), scale_factor=2).data,
                                  tF.interpolate(torch.tensor(u), scale_factor=2).numpy())


# ----- unfold / fold -----
UNFOLD_CASES = [dict(kernel_size=2), dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3), stride=(2, 1)),
                dict(kernel_size=3, dilation=2, padding=2, stride=2), dict(kernel_size=(3, 1), dilation=(1, 3),
                                                                          padding=(0, 2), stride=(1, 2))]


@pytest.mark.parametrize("kw", UNFOLD_CASES, ids=_ids)
def test_unfold_and_fold_match_torch(rng, kw):
    for shape in ((2, 3, 7, 8), (1, 1, 5, 6), (3, 6, 7)):
        x = rng.normal(size=shape)
        _compare(lambda t: R.unfold(t, **kw), lambda t: tF.unfold(t, **kw), x, rng)
        cols = tF.unfold(torch.tensor(x), **kw).numpy()
        _compare(lambda t: R.fold(t, shape[-2:], **kw), lambda t: tF.fold(t, shape[-2:], **kw), cols, rng)


def test_fold_of_unfold_counts_the_blocks_as_torch(rng):
    x = rng.normal(size=(2, 3, 6, 7))
    for kw in UNFOLD_CASES:
        ours = R.fold(R.unfold(cr.tensor(x), **kw), (6, 7), **kw)
        theirs = tF.fold(tF.unfold(torch.tensor(x), **kw), (6, 7), **kw)
        np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=RTOL, atol=ATOL)
        # dividing by fold(unfold(ones)) inverts where every pixel is covered
        ones = R.fold(R.unfold(cr.ones(x.shape, dtype=cr.float64), **kw), (6, 7), **kw).data
        covered = ones > 0
        np.testing.assert_allclose((ours.data / np.where(covered, ones, 1))[covered], x[covered], rtol=RTOL)


def test_pixel_shuffle_matches_torch(rng):
    for shape, r in (((2, 8, 3, 4), 2), ((9, 2, 3), 3), ((2, 1, 4, 1, 2), 1)):
        x = rng.normal(size=shape)
        _compare(lambda t: R.pixel_shuffle(t, r), lambda t: tF.pixel_shuffle(t, r), x, rng)
        y = tF.pixel_shuffle(torch.tensor(x), r).numpy()
        _compare(lambda t: R.pixel_unshuffle(t, r), lambda t: tF.pixel_unshuffle(t, r), y, rng)


# ----- second order -----
def t64(rng, *shape):
    return cr.tensor(rng.normal(size=shape), dtype=cr.float64, requires_grad=True)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: R.interpolate(x, scale_factor=1.7, mode="bilinear"), (1, 2, 3, 4)),
    (lambda x: R.interpolate(x, size=(5, 2), mode="bilinear", align_corners=True), (1, 2, 3, 4)),
    (lambda x: R.interpolate(x, size=5, mode="linear"), (2, 1, 4)),
    (lambda x: R.interpolate(x, size=(4, 5), mode="bicubic"), (1, 1, 3, 3)),
    (lambda x: R.interpolate(x, scale_factor=2, mode="trilinear"), (1, 1, 2, 2, 2)),
    (lambda x: R.fold(x, (3, 3), 2, padding=1), (1, 8, 16)),
    (lambda x: R.unfold(x, 2, dilation=2, padding=1), (1, 2, 4, 4)),
], ids=["bilinear", "bilinear-align", "linear", "bicubic", "trilinear", "fold", "unfold"])
def test_resampling_gradcheck_to_second_order(rng, fn, shape):
    x = t64(rng, *shape)
    assert cr.gradcheck(fn, (x,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(fn, (x,))


def test_resampling_under_vmap(rng):
    x = rng.normal(size=(3, 1, 2, 4, 5))
    for fn in (lambda t: R.interpolate(t, scale_factor=1.5, mode="bilinear"), lambda t: R.unfold(t, 2, padding=1),
               lambda t: R.fold(R.unfold(t, 2), (4, 5), 2)):
        batched = cr.vmap(fn)(cr.tensor(x))
        for b in range(3):
            np.testing.assert_allclose(batched.data[b], fn(cr.tensor(x[b])).data, rtol=RTOL)


# ----- modules -----
MODULES = [
    ("Upsample", dict(scale_factor=2, mode="nearest"), (2, 3, 4, 5)),
    ("Upsample", dict(size=(7, 3), mode="bilinear", align_corners=True), (2, 3, 4, 5)),
    ("Upsample", dict(scale_factor=1.5, mode="linear"), (2, 3, 5)),
    ("Upsample", dict(scale_factor=(2, 1, 1.5), mode="trilinear"), (1, 2, 3, 2, 4)),
    ("UpsamplingNearest2d", dict(size=(6, 8)), (1, 2, 3, 4)),
    ("UpsamplingBilinear2d", dict(scale_factor=2), (1, 2, 3, 4)),
    ("Unfold", dict(kernel_size=(2, 3), dilation=1, padding=1, stride=2), (2, 3, 6, 7)),
    ("Fold", dict(output_size=(5, 6), kernel_size=2, stride=1), (2, 12, 20)),
    ("PixelShuffle", dict(upscale_factor=2), (2, 8, 3, 3)),
    ("PixelUnshuffle", dict(downscale_factor=2), (2, 2, 4, 6)),
]


@pytest.mark.parametrize("name,kwargs,shape", MODULES, ids=[f"{m[0]}-{_ids(m[1])}" for m in MODULES])
def test_resampling_modules_match_torch(rng, name, kwargs, shape):
    ours, theirs = getattr(NR, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    _compare(ours, theirs, rng.normal(size=shape), rng)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == []


# ----- errors -----
def test_errors_name_the_function_and_the_fix():
    x = cr.ones((1, 2, 4, 4))
    with pytest.raises(ValueError, match="interpolate: unknown mode 'cubic'; use one of nearest"):
        R.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(cr.ShapeError, match=r"interpolate: mode 'bilinear' needs 4-D input .* got shape \(2, 4, 4\); "
                                             r"add the batch axis"):
        R.interpolate(cr.ones((2, 4, 4)), scale_factor=2, mode="bilinear")
    with pytest.raises(cr.ShapeError, match="mode 'nearest' needs 3-D or 4-D or 5-D input"):
        R.interpolate(cr.ones((4, 4)), scale_factor=2)
    with pytest.raises(ValueError, match="exactly one of size or scale_factor, got both"):
        R.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="got neither"):
        R.interpolate(x)
    with pytest.raises(ValueError, match="align_corners is for the modes linear"):
        R.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful with an explicit size"):
        R.interpolate(x, size=3, recompute_scale_factor=True)
    with pytest.raises(ValueError, match=r"needs size with 2 values, got \(3, 3, 3\)"):
        R.interpolate(x, size=(3, 3, 3))
    with pytest.raises(cr.ShapeError, match=r"interpolate: input and output sizes must be positive.*output \(1, 0\)"):
        R.interpolate(x, scale_factor=(0.3, 0.2))
    with pytest.raises(NotImplementedError, match="antialias"):
        R.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True)
    with pytest.raises(cr.DTypeError, match="interpolate: expected a floating-point input"):
        R.interpolate(cr.tensor(np.ones((1, 1, 2, 2), dtype=np.int64)), scale_factor=2, mode="bilinear")
    with pytest.raises(cr.ShapeError, match=r"unfold: expected input of shape \(N, C, H, W\) or \(C, H, W\)"):
        R.unfold(cr.ones((4, 4)), 2)
    with pytest.raises(cr.ShapeError, match=r"unfold: spatial size \(4, 4\) .* gives \(0, 0\) sliding blocks"):
        R.unfold(x, 5)
    with pytest.raises(cr.ShapeError, match=r"fold: input's dimension 1 \(5\) must be divisible .* \(4\)"):
        R.fold(cr.ones((1, 5, 9)), (4, 4), 2)
    with pytest.raises(cr.ShapeError, match=r"fold: .* give 3 \* 3 = 9 sliding blocks, but the input has 8"):
        R.fold(cr.ones((1, 4, 8)), (4, 4), 2)
    with pytest.raises(cr.ShapeError, match=r"pixel_shuffle: channels \(3\) must be divisible by upscale_factor"):
        R.pixel_shuffle(cr.ones((1, 3, 2, 2)), 2)
    with pytest.raises(cr.ShapeError, match=r"pixel_unshuffle: height and width \(3, 4\)"):
        R.pixel_unshuffle(cr.ones((1, 1, 3, 4)), 2)
