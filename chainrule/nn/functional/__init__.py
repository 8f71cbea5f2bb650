"""``cr.nn.functional``: the layers' functions, as ``torch.nn.functional`` (``F.linear``, ``F.cross_entropy``,
...); each family in its own module here."""
from chainrule.nn.functional import (
           activation,
           attention,
           basic,
           conv,
           loss,
           normalization,
           padding,
           pooling,
           resampling,
)
from chainrule.nn.functional.activation import *  # noqa: F403
from chainrule.nn.functional.attention import *  # noqa: F403
from chainrule.nn.functional.basic import *  # noqa: F403
from chainrule.nn.functional.conv import *  # noqa: F403
from chainrule.nn.functional.loss import *  # noqa: F403
from chainrule.nn.functional.normalization import *  # noqa: F403
from chainrule.nn.functional.padding import *  # noqa: F403
from chainrule.nn.functional.pooling import *  # noqa: F403
from chainrule.nn.functional.resampling import *  # noqa: F403

__all__ = (basic.__all__ + activation.__all__ + loss.__all__ + normalization.__all__ + attention.__all__
           + conv.__all__ + padding.__all__ + pooling.__all__ + resampling.__all__)
