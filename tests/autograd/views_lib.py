"""The same hand-written program in chainrule or torch: the adapter shared by test_views.py and
test_views_parity.py (``from tests.autograd.views_lib import Lib``)."""
import numpy as np

import chainrule as cr
from chainrule import forward_ad as fwAD


class Lib:
    """``Lib()`` runs a program in chainrule, ``Lib(torch)`` in torch: tensor, exp, tanh, erfinv,
    broadcast_to, no_grad, split, forward mode and the custom-Function base class."""

    def __init__(self, torch=None):
        self.torch = torch

    def t(self, v, rg=False):
        v = np.asarray(v, dtype=np.float64)
        if self.torch is None:
            return cr.tensor(v, requires_grad=rg)
        return self.torch.tensor(v, requires_grad=rg)

    def exp(self, x):
        return cr.exp(x) if self.torch is None else x.exp()

    def tanh(self, x):
        return cr.tanh(x) if self.torch is None else x.tanh()

    def erfinv(self, x):
        return cr.special.erfinv(x) if self.torch is None else self.torch.special.erfinv(x)

    def broadcast_to(self, x, shape):
        return cr.broadcast_to(x, shape) if self.torch is None else x.expand(*shape)

    def no_grad(self):
        return cr.no_grad() if self.torch is None else self.torch.no_grad()

    def split(self, x, n):                    # n equal pieces of a 1-D tensor
        return cr.split(x, n) if self.torch is None else x.split(x.shape[0] // n)

    def fw(self):
        if self.torch is None:
            return fwAD
        import torch.autograd.forward_ad as tfw
        return tfw

    def function(self):
        return cr.Function if self.torch is None else self.torch.autograd.Function
