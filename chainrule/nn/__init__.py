"""Neural-network layers and losses (``cr.nn``), following ``torch.nn``'s names and semantics."""
from chainrule.nn import (
    activation,
    containers,
    functional,
    init,
    loss,
    normalization,
    parallel,
    rnn,
    transformer,
    utils,
)
from chainrule.nn.activation import *  # noqa: F403  (each family lists its modules in __all__)
from chainrule.nn.attention import MultiheadAttention
from chainrule.nn.containers import *  # noqa: F403
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
from chainrule.nn.loss import *  # noqa: F403
from chainrule.nn.module import IncompatibleKeys, Module, Parameter, RemovableHandle
from chainrule.nn.normalization import *  # noqa: F403
from chainrule.nn.rnn import *  # noqa: F403
from chainrule.nn.transformer import *  # noqa: F403

__all__ = ["AvgPool2d", "Conv2d", "Dropout", "Embedding", "Flatten", "GELU", "IncompatibleKeys",
           "LayerNorm", "Linear", "MaxPool2d", "Module", "Parameter", "ReLU", "RemovableHandle",
           "Sequential", "Sigmoid", "Tanh", "functional", "init", "parallel", "utils"]
for _family in (activation, containers, loss, normalization, rnn, transformer):
    __all__ += _family.__all__
__all__ += ["MultiheadAttention"]
