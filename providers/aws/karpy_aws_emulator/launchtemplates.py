"""Fleet instances take their launch template's security groups, as on EC2 (moto drops them).

EC2 launches a CreateFleet instance with the security groups its launch template names
(``SecurityGroupIds``, or the first network interface's ``Groups`` when the template sets a
public-IP choice). moto builds each fleet launch spec from a template key EC2 does not have
(``GroupSet``), so its fleet instances get the VPC's default group, and karpy's drift check then
calls every instance ``SecurityGroupDrift``. ``install()`` gives every launch template version
that key, filled from the fields EC2 reads (once per process; moto's state is per process too).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

_installed = threading.Event()


def template_groups(data: Mapping[str, Any]) -> list[str]:
    """The security groups a launch template's data gives its instances, as EC2 reads them."""
    groups = data.get("SecurityGroupIds") or data.get("SecurityGroupId") or []
    if not groups:
        for interface in data.get("NetworkInterfaces") or data.get("NetworkInterface") or []:
            if str(interface.get("DeviceIndex", 0)) == "0":
                groups = interface.get("Groups") or interface.get("SecurityGroupId") or []
                break
    return [str(g) for g in groups]


def install() -> None:
    """Make moto's fleet launches use the template's security groups. Imports moto."""
    if _installed.is_set():
        return
    from moto.ec2.models.launch_templates import LaunchTemplateVersion

    original: Callable[..., None] = LaunchTemplateVersion.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if not self.data.get("GroupSet"):
            groups = template_groups(self.data)
            if groups:
                self.data = {**self.data, "GroupSet": groups}

    LaunchTemplateVersion.__init__ = init  # type: ignore[method-assign]
    _installed.set()
