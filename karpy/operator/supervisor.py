"""The supervisor: every root loop of `karpy run` under one TaskGroup, and the shutdown order.

Task ownership (house rule 7): the root TaskGroup owns the probe server, the conversion webhook
(when enabled; it serves on every replica), one task per informer,
the leader elector and the controller group; the controller group owns each controller's runner,
which owns its workers. Probes, informers and the elector run on every replica; controllers start
only once this replica leads. If any root task fails (leadership lost, a bug), the group cancels
the rest and the process exits non-zero, as Karpenter does.

On SIGTERM the order is fixed: (1) stop the watches, so state stops changing; (2) stop the
controllers from taking work and let in-flight reconciles finish within the grace period, then
cancel stragglers; (3) stop renewing and release the lease, so another replica takes over at its
next retry instead of after a full lease duration; (4) stop the probes and the webhook. The
caller then closes the kube client and flushes telemetry.
"""

from __future__ import annotations

import asyncio
import logging

from karpy.operator.components import Components

log = logging.getLogger(__name__)


class Supervisor:
    """Runs `components` until `stop` is set, then shuts down in order."""

    def __init__(self, components: Components, *, stop: asyncio.Event) -> None:
        self._c = components
        self._stop = stop
        self._controllers_started = asyncio.Event()

    async def run(self) -> None:
        """Run until `stop` is set; raises (in an ExceptionGroup) if a root task fails."""
        c = self._c
        async with asyncio.TaskGroup() as root:
            probes = root.create_task(c.probes.run(), name="probes")
            webhook = None
            if c.webhook is not None:
                # Listening and registered in the CRDs before anything else: from here on the
                # apiserver can serve v1beta1.
                await c.webhook.start()
                webhook = root.create_task(c.webhook.run(), name="conversion-webhook")
            informers = [
                root.create_task(informer.run(), name=f"informer-{informer.kind}")
                for informer in c.informers
            ]
            elector = (
                root.create_task(c.elector.run(), name="leader-election")
                if c.elector is not None
                else None
            )
            controllers = root.create_task(self._run_controllers(), name="controllers")
            await self._stop.wait()
            log.info("shutting down")
            await _cancel_and_wait(*informers)
            log.debug("watches stopped")
            await self._drain(controllers)
            if elector is not None and c.elector is not None:
                await _cancel_and_wait(elector)
                await c.elector.release()
            await _cancel_and_wait(probes, *([webhook] if webhook is not None else []))
        log.info("shut down")

    async def _run_controllers(self) -> None:
        c = self._c
        if c.elector is not None:
            await c.elector.leading.wait()
        self._controllers_started.set()
        log.info("starting controllers", extra={"count": len(c.controllers)})
        async with asyncio.TaskGroup() as group:
            for controller in c.controllers:
                group.create_task(controller.run(), name=f"controller-{controller.name}")

    async def _drain(self, controllers: asyncio.Task[None]) -> None:
        if not self._controllers_started.is_set():
            await _cancel_and_wait(controllers)
            return
        for controller in self._c.controllers:
            controller.stop()
        grace = self._c.options.shutdown.grace_period
        done, _ = await asyncio.wait({controllers}, timeout=grace)
        if not done:
            log.warning(
                "in-flight reconciles did not finish in time", extra={"grace_period": grace}
            )
            await _cancel_and_wait(controllers)


async def _cancel_and_wait(*tasks: asyncio.Task[None]) -> None:
    """Cancel tasks and wait until they have finished (their errors surface in the TaskGroup)."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
