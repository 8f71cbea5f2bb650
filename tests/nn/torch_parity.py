"""Helpers the nn tests share to compare a chainrule module with its torch twin in float64."""
import numpy as np

RTOL, ATOL = 1e-10, 1e-12


def close(ours, theirs, what):
    """``ours`` (a chainrule tensor) equals ``theirs`` (a torch tensor or an array) to RTOL/ATOL."""
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    np.testing.assert_allclose(np.asarray(ours.data), theirs, rtol=RTOL, atol=ATOL, err_msg=what)


def load_torch(ours, theirs):
    """Copy torch's weights into ours after checking the keys (and their order) and shapes agree."""
    sd = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    mine = ours.state_dict()
    assert list(mine) == list(sd)
    assert {k: tuple(v.shape) for k, v in mine.items()} == {k: v.shape for k, v in sd.items()}
    ours.load_state_dict(sd)
