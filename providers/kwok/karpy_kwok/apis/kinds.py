"""The KWOKNodeClass's REST coordinates and decoder.

karpy's own kinds live in karpy.kube.kinds; KWOKNodeClass is the kwok provider's, so it is bound
here, where the provider reads it and declares it for the operator to inform.
"""

from __future__ import annotations

import functools
from typing import Final

from karpy.apis.codec import from_dict
from karpy.kube.resources import ResourceKind
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass

KWOK_NODECLASSES: Final = ResourceKind[KWOKNodeClass](
    kind=KWOKNodeClass.KIND,
    plural=KWOKNodeClass.PLURAL,
    group=KWOKNodeClass.GROUP,
    version=KWOKNodeClass.VERSION,
    namespaced=False,
    decode=functools.partial(from_dict, KWOKNodeClass),
)
