"""The ``clusterapi.nodeclass`` controller: a ClusterAPINodeClass is Ready while its selector
matches at least one MachineDeployment of the management cluster, and its status lists them.

MachineDeployments live in the management cluster, which the operator's informers do not watch
(the provider's own do: a resolution reads them from memory), so each NodeClass is resolved
again every minute as well as on its own changes.
"""

from __future__ import annotations

import logging
from typing import Final

import attrs

from karpy.apis.meta import Condition, ConditionStatus
from karpy.kube.client import KubeClient
from karpy.manager import Controller, Result, Watch, object_controller
from karpy.runtime.clock import Clock
from karpy_clusterapi.apis.kinds import NODECLASSES
from karpy_clusterapi.apis.nodeclass import SelectedMachineDeployment
from karpy_clusterapi.providers.machines import Fleet
from karpy_clusterapi.providers.nodeclass import NodeClasses, selected

log = logging.getLogger(__name__)

NAME: Final = "clusterapi.nodeclass"
RESOLVE_PERIOD: Final = 60.0
"""Seconds between resolutions of one NodeClass's selector."""


class NodeClassController:
    def __init__(
        self, kube: KubeClient, fleet: Fleet, nodeclasses: NodeClasses, *, clock: Clock
    ) -> None:
        self._kube = kube
        self._fleet = fleet
        self._nodeclasses = nodeclasses
        self._clock = clock

    async def reconcile(self, name: str) -> Result:
        """Resolve the NodeClass's selector and write its status when it changed."""
        nodeclass = await self._nodeclasses.read(name)
        if nodeclass is None or nodeclass.metadata.deletion_timestamp is not None:
            return Result()
        matched = selected(nodeclass, await self._fleet.deployments())
        listed = tuple(
            SelectedMachineDeployment(namespace=md.namespace, name=md.name) for md in matched
        )
        if matched:
            status, reason = ConditionStatus.TRUE, "Ready"
            message = ""
        else:
            status, reason = ConditionStatus.FALSE, "NoMachineDeployments"
            message = "spec.scalableResourceSelector matches no MachineDeployment"
        previous = next((c for c in nodeclass.status.conditions if c.type == "Ready"), None)
        if previous is not None and (previous.status, previous.reason, previous.message) == (
            status,
            reason,
            message,
        ):
            ready = previous
        else:
            ready = Condition(
                type="Ready",
                status=status,
                last_transition_time=self._clock.now(),
                reason=reason,
                message=message,
                observed_generation=nodeclass.metadata.generation,
            )
        others = tuple(c for c in nodeclass.status.conditions if c.type != "Ready")
        wanted = attrs.evolve(
            nodeclass.status, conditions=(*others, ready), machine_deployments=listed
        )
        if wanted != nodeclass.status:
            await self._kube.patch_status(
                NODECLASSES,
                name,
                wanted,
                previous=nodeclass.status,
                resource_version=nodeclass.metadata.resource_version,
            )
            log.info(
                "resolved clusterapinodeclass",
                extra={
                    "clusterapinodeclass": name,
                    "ready": status is ConditionStatus.TRUE,
                    "machinedeployments": [f"{m.namespace}/{m.name}" for m in listed],
                },
            )
        return Result(requeue_after=RESOLVE_PERIOD)

    def spec(self) -> Controller:
        return object_controller(
            NAME, self.reconcile, watches=(Watch(kind=NODECLASSES),), reads=(NODECLASSES,)
        )
