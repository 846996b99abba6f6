"""The cluster's Kubernetes version, which AMI aliases resolve by.

EKS publishes its optimized AMIs per Kubernetes minor version, so ``al2023@latest`` names a
different image on 1.31 than on 1.32. Karpenter asks the apiserver (``GET /version``) and asks
again every few minutes, so that after a control-plane upgrade new nodes get the matching AMIs
(and drift replaces the old ones). The ``kubernetes-version`` setting pins the version instead:
for a stand-in such as moto whose SSM parameters are seeded for one version.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError
from karpy.runtime.clock import Clock
from karpy_aws.errors import ConfigurationError

VERSION_TTL: Final = datetime.timedelta(minutes=5)
"""How long a discovered version is trusted (the reference's five minutes)."""
VERSION_PATH: Final = "/version"

_VERSION: Final = re.compile(r"^v?(\d+)\.(\d+)")
_PINNED: Final = re.compile(r"^1\.\d+$")

log = logging.getLogger(__name__)


def parse_version(body: Mapping[str, Any]) -> str:
    """``<major>.<minor>`` from the apiserver's /version body.

    EKS reports ``minor`` as "31+", so the trailing "+" is dropped; ``gitVersion``
    (``v1.31.4-eks-...``) is the fallback. Raises ConfigurationError when neither says.
    """
    major = str(body.get("major", "")).rstrip("+")
    minor = str(body.get("minor", "")).rstrip("+")
    if major.isdigit() and minor.isdigit():
        return f"{int(major)}.{int(minor)}"
    found = _VERSION.match(str(body.get("gitVersion", "")))
    if found is not None:
        return f"{int(found[1])}.{int(found[2])}"
    raise ConfigurationError(f"the apiserver's /version names no major.minor version: {body!r}")


def check_pinned(version: str) -> str:
    """The ``kubernetes-version`` setting, checked: ``1.<minor>``. Raises ConfigurationError."""
    if not _PINNED.match(version):
        raise ConfigurationError(
            f"kubernetes version {version!r} must look like 1.<minor> (for example 1.31)"
        )
    return version


class KubernetesVersion:
    """The version AMI aliases resolve for: pinned, or read from the apiserver and cached.

    ``fallback`` (EKS DescribeCluster's version, when the factory read it) answers while the
    apiserver cannot, as does the last version read.
    """

    def __init__(
        self,
        kube: KubeClient,
        clock: Clock,
        *,
        pinned: str | None = None,
        fallback: str | None = None,
        ttl: datetime.timedelta = VERSION_TTL,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._pinned = None if pinned is None else check_pinned(pinned)
        self._fallback = fallback or None
        self._ttl = ttl
        self._known: str | None = None
        self._until: datetime.datetime | None = None

    async def get(self) -> str:
        """The version as ``1.<minor>``. Side effect: at most one GET /version per TTL.

        Raises KubeError or ConfigurationError only when no version was ever known.
        """
        if self._pinned is not None:
            return self._pinned
        now = self._clock.now()
        if self._known is not None and self._until is not None and now < self._until:
            return self._known
        try:
            version = parse_version(await self._kube.request("GET", VERSION_PATH))
        except (KubeError, ConfigurationError) as error:
            known = self._known or self._fallback
            if known is None:
                raise
            log.warning(
                "failed to discover kubernetes version, using the last known one",
                extra={"version": known, "error": str(error)},
            )
            return known
        if version != self._known:
            log.info("discovered kubernetes version", extra={"version": version})
        self._known, self._until = version, now + self._ttl
        return version
