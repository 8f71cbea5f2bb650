"""``cr.func``: function transforms, as ``torch.func`` and JAX: ``grad``, ``vjp``, ``jvp``, ``jacrev``,
``jacfwd``, ``hessian``, ``vmap``; with ``functional_call`` (a module run with other tensors) and
``per_example_grad_norms`` (per-example gradient norms of ``Linear`` layers without per-example
gradients).

>>> import chainrule as cr
>>> model = cr.nn.Linear(3, 2)
>>> params = {k: v.detach() for k, v in model.named_parameters()}
>>> cr.func.functional_call(model, params, (cr.ones((4, 3)),)).shape
(4, 2)
"""
from chainrule.func.batching import vmap
from chainrule.func.module_calls import functional_call, per_example_grad_norms, replace_all_batch_norm_modules_
from chainrule.func.transforms import grad, hessian, jacfwd, jacrev, jvp, vjp

__all__ = ["functional_call", "per_example_grad_norms", "replace_all_batch_norm_modules_", "vmap", "grad",
           "vjp", "jvp", "jacrev", "jacfwd", "hessian"]
