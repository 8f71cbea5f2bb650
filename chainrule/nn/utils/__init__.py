"""``cr.nn.utils``: gradient clipping, parameters <-> one vector, ``rnn`` (padding sequences),
``parametrize`` and ``parametrizations`` (weight_norm, spectral_norm), and the older hook-based
``weight_norm`` / ``spectral_norm``."""
from chainrule.nn.utils import parametrizations, parametrize, rnn
from chainrule.nn.utils._legacy_norms import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm
from chainrule.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from chainrule.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "parametrizations", "parametrize", "remove_spectral_norm",
           "remove_weight_norm", "rnn", "spectral_norm", "vector_to_parameters", "weight_norm"]
