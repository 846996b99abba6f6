"""Garbage collection of instance profiles karpy made and no longer uses.

A NodeClass that names a ``role`` gets an instance profile karpy creates for it; when the role
changes it gets a new one (a profile's role is never swapped under running nodes), and when the
NodeClass is deleted its finalizer deletes its profile. The old profile of a changed role, and
the profile of a NodeClass removed without its finalizer, stay behind. As Karpenter does, the
leader deletes them: every profile named and tagged as this cluster's (in this region) that no
EC2NodeClass's status names, no live instance of the cluster runs with, and that is more than
an hour old (a profile just made may not be in a status yet).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import ClassVar, Final

from karpy.manager import Singleton
from karpy.runtime.clock import Clock
from karpy.runtime.reconciler import Result
from karpy.state.view import ClusterView
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.apis.kinds import EC2NODECLASSES
from karpy_aws.providers.instance import Instances
from karpy_aws.providers.instanceprofile import delete_profile, list_managed
from karpy_aws.session import AWSClient

PROFILE_GC_PERIOD: Final = 300.0
"""Seconds between passes."""
PROFILE_GC_TIMEOUT: Final = 300.0
"""Deadline in seconds for one pass."""
PROTECTION: Final = datetime.timedelta(hours=1)
"""A profile younger than this is kept (Karpenter's protection period)."""

log = logging.getLogger(__name__)


class InstanceProfileGC:
    """Delete this cluster's instance profiles nothing uses any more."""

    name: ClassVar[str] = "instanceprofile.garbagecollection"

    def __init__(
        self,
        view: ClusterView,
        iam: AWSClient,
        instances: Instances,
        *,
        cluster_name: str,
        region: str,
        clock: Clock,
        period: float = PROFILE_GC_PERIOD,
    ) -> None:
        self._view = view
        self._iam = iam
        self._instances = instances
        self._cluster_name = cluster_name
        self._region = region
        self._clock = clock
        self._period = period

    def spec(self) -> Singleton:
        """The loop, declared for the operator to run (on the leader)."""
        return Singleton(name=self.name, reconcile=self.reconcile_once)

    async def reconcile_once(self) -> Result:
        """One pass, then the next a period later. Raises AWSError when IAM or EC2 fails."""
        async with asyncio.timeout(PROFILE_GC_TIMEOUT):
            await self.collect()
        return Result(requeue_after=self._period)

    async def collect(self) -> tuple[str, ...]:
        """Delete the unused profiles; return their names. Nothing is deleted before the
        view has listed the EC2NodeClasses (an empty view would make every profile unused)."""
        if not self._view.informers_synced:
            return ()
        in_status = {
            n.status.instance_profile
            for n in self._view.objects(EC2NODECLASSES)
            if isinstance(n, EC2NodeClass) and n.status.instance_profile
        }
        profiles = await list_managed(
            self._iam, cluster_name=self._cluster_name, region=self._region
        )
        cutoff = self._clock.now() - PROTECTION
        candidates = [p for p in profiles if p.name not in in_status and p.created < cutoff]
        if not candidates:
            return ()
        running = {i.instance_profile for i in await self._instances.list() if i.instance_profile}
        deleted = []
        for profile in candidates:
            if profile.name in running:
                continue
            if await delete_profile(self._iam, profile.name):
                deleted.append(profile.name)
                log.info(
                    "deleted unused instance profile",
                    extra={"instance_profile": profile.name, "nodeclass": profile.nodeclass},
                )
        return tuple(deleted)
