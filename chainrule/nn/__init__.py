"""Neural-network layers and losses (``cr.nn``), following ``torch.nn``'s names and semantics."""
from chainrule.nn import functional, init, normalization, parallel, rnn, transformer
from chainrule.nn.attention import MultiheadAttention
from chainrule.nn.layers import (
    GELU,
    AvgPool2d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MaxPool2d,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from chainrule.nn.module import IncompatibleKeys, Module, Parameter, RemovableHandle
from chainrule.nn.normalization import *  # noqa: F403  (each family lists its modules in __all__)
from chainrule.nn.rnn import *  # noqa: F403
from chainrule.nn.transformer import *  # noqa: F403

__all__ = ["AvgPool2d", "Conv2d", "Dropout", "Embedding", "Flatten", "GELU", "IncompatibleKeys",
           "LayerNorm", "Linear", "MaxPool2d", "Module", "Parameter", "ReLU", "RemovableHandle",
           "Sequential", "Sigmoid", "Tanh", "functional", "init", "parallel"]
__all__ += normalization.__all__ + rnn.__all__ + transformer.__all__ + ["MultiheadAttention"]
