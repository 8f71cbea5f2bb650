"""``cr.nn.functional``: the layers' functions, as ``torch.nn.functional`` (``F.linear``, ``F.cross_entropy``,
...); each family in its own module here."""
from chainrule.nn.functional import basic
from chainrule.nn.functional.basic import *  # noqa: F403

__all__ = list(basic.__all__)
