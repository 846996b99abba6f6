"""The launches pass: creates the Nodes of pending launches once their registration delay ran out.

With a registration delay, the cloud provider's ``create`` returns at once (the NodeClaim is
Launched) and holds a pending launch; this pass creates its Node when it falls due. It runs at
start, when a launch is held and when the next one falls due; with no delay it has nothing to do.
At start it first has the launches an earlier process left waiting held again (the cloud
provider's ``resume``), once cluster state has synced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from karpy.cloudprovider import CreateError
from karpy.kube.errors import KubeError
from karpy.runtime.reconciler import Result
from karpy_kwok.providers.instance import KwokInstances

log = logging.getLogger(__name__)

RETRY_SECONDS: Final = 1.0
"""Wait before retrying a delayed Node creation that failed (the apiserver was unreachable)."""


class LaunchController:
    """Creates the Nodes of `instances`' pending launches as they fall due."""

    def __init__(self, instances: KwokInstances, *, resume: Callable[[], Awaitable[bool]]) -> None:
        self._instances = instances
        self._resume = resume

    async def reconcile_once(self) -> Result:
        """Create the Nodes of pending launches that have fallen due; ask to run again when the
        next one falls due.

        Waits (RETRY_SECONDS at a time) until the launches left by an earlier process are held
        again. A failed creation is logged and retried after RETRY_SECONDS; a kwok Node that already
        exists counts as created; a launch deleted while its Node was being created has the Node
        deleted again. Failures are logged, never raised.
        """
        if not await self._resume():
            return Result(requeue_after=RETRY_SECONDS)  # cluster state has not synced yet
        instances = self._instances
        now = asyncio.get_running_loop().time()
        for name, launch in instances.due(now):
            try:
                await instances.create(launch.node)
            except CreateError as error:
                log.warning("failed creating kwok node", extra={"node": name, "error": str(error)})
                instances.settle(name, launch)
                continue
            except KubeError as error:
                log.warning(
                    "failed creating kwok node",
                    extra={"node": name, "error": str(error), "retry_after": RETRY_SECONDS},
                )
                instances.postpone(name, launch, now + RETRY_SECONDS)
                continue
            if not instances.settle(name, launch):
                # Deleted while its Node was being created: the Node must not outlive it.
                await instances.delete_orphan(name)
        next_due = instances.next_due()
        if next_due is None:
            return Result()
        return Result(requeue_after=max(next_due - asyncio.get_running_loop().time(), 0.0))
