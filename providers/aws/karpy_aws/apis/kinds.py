"""The EC2NodeClass's REST coordinates and decoder, for the provider's apiserver reads and writes.

karpy's own kinds live in karpy.kube.kinds; EC2NodeClass is the AWS provider's, so it is bound
here, where both the factory (launch-time reads) and the NodeClass controller use it.
"""

from __future__ import annotations

import functools
from typing import Final

from karpy.apis.codec import from_dict
from karpy.kube.resources import ResourceKind
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

EC2NODECLASSES: Final = ResourceKind[EC2NodeClass](
    kind=EC2NodeClass.KIND,
    plural=EC2NodeClass.PLURAL,
    group=EC2NodeClass.GROUP,
    version=EC2NodeClass.VERSION,
    namespaced=False,
    decode=functools.partial(from_dict, EC2NodeClass),
)
