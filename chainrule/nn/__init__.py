"""Neural-network layers and losses (``cr.nn``), following ``torch.nn``'s names and semantics."""
from chainrule.nn import (
    activation,
    containers,
    conv,
    functional,
    init,
    loss,
    normalization,
    parallel,
    pooling,
    resampling,
    rnn,
    transformer,
    utils,
)
from chainrule.nn.activation import *  # noqa: F403  (each family lists its modules in __all__)
from chainrule.nn.attention import MultiheadAttention
from chainrule.nn.containers import *  # noqa: F403
from chainrule.nn.conv import *  # noqa: F403
from chainrule.nn.layers import (
    GELU,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from chainrule.nn.loss import *  # noqa: F403
from chainrule.nn.module import IncompatibleKeys, Module, Parameter, RemovableHandle
from chainrule.nn.normalization import *  # noqa: F403
from chainrule.nn.pooling import *  # noqa: F403
from chainrule.nn.resampling import *  # noqa: F403
from chainrule.nn.rnn import *  # noqa: F403
from chainrule.nn.transformer import *  # noqa: F403

__all__ = ["Dropout", "Embedding", "Flatten", "GELU", "IncompatibleKeys",
           "LayerNorm", "Linear", "Module", "Parameter", "ReLU", "RemovableHandle",
           "Sequential", "Sigmoid", "Tanh", "functional", "init", "parallel", "utils"]
for _family in (activation, containers, conv, loss, normalization, pooling, resampling, rnn, transformer):
    __all__ += _family.__all__
__all__ += ["MultiheadAttention"]
