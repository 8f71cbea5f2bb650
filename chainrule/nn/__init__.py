"""Neural-network layers and losses (``cr.nn``), following ``torch.nn``'s names and semantics."""
from chainrule.nn import functional, init, parallel
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

__all__ = ["AvgPool2d", "Conv2d", "Dropout", "Embedding", "Flatten", "GELU", "IncompatibleKeys",
           "LayerNorm", "Linear", "MaxPool2d", "Module", "Parameter", "ReLU", "RemovableHandle",
           "Sequential", "Sigmoid", "Tanh", "functional", "init", "parallel"]
