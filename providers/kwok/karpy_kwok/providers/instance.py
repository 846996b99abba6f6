"""kwok's instances: the kwok Nodes on the apiserver, and the launches waiting to become one.

No cloud: an instance *is* a Node annotated ``kwok.x-k8s.io/node=fake``, which kwok (running
against the same apiserver) marks Ready and whose pods it moves to Running. Nodes are read from
the operator's cluster view, which informs them, so the simulated cloud costs the apiserver no
reads of its own; from the apiserver only when built without a view (tests).

Pending launches. A real instance takes a while to join: a launch with a registration delay is
held here, in memory, until it falls due and the ``kwok.launches`` pass creates its Node. Pending
launches are instances like any other to the cloud provider's ``get``, ``list`` and ``delete``,
so garbage collection and termination treat them correctly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Final

import attrs

from karpy.apis.kube.node import Node
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider import CreateError
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, KubeError, NotFoundError
from karpy.kube.kinds import NODES
from karpy.runtime.channels import Keys
from karpy.state.view import ClusterView
from karpy_kwok.providers.nodes import is_ours, launched_for

log = logging.getLogger(__name__)

HELD: Final = "kwok.held-launches"
"""The channel on which a held launch (its Node name) wakes the launches pass."""


@attrs.frozen
class PendingLaunch:
    """A launch whose Node is created at `due` (event-loop time)."""

    node: Node
    nodeclaim: NodeClaim
    due: float


class KwokInstances:
    """kwok Nodes through `kube` (read from `view` when it informs Nodes) and the pending
    launches, by Node name.

    Side effects: creates and deletes Nodes; keeps pending launches in memory.
    """

    def __init__(self, kube: KubeClient, view: ClusterView | None) -> None:
        self._kube = kube
        self._view = view
        self._pending: dict[str, PendingLaunch] = {}
        self.held = Keys(HELD)
        """Names of the launches held, for the launches pass to declare as its source."""

    # ------------------------------------------------------------------ Nodes

    async def read(self, name: str) -> Node | None:
        """The Node `name`, from the view when it informs Nodes, else from the apiserver."""
        if self._view is not None and self._view.informs(NODES):
            return self._view.node(name)
        try:
            return await self._kube.get(NODES, name)
        except NotFoundError:
            return None

    async def read_all(self) -> Sequence[Node]:
        """Every Node, from the view when there is one (see `read`)."""
        if self._view is not None and self._view.informs(NODES):
            return self._view.nodes()
        return [item.obj for item in (await self._kube.list(NODES)).items]

    async def create(self, node: Node) -> Node | None:
        """Create the Node; when one of that name exists already, return it instead.

        Raises CreateError when the name is taken by a Node that is not a kwok instance.
        """
        try:
            await self._kube.create(NODES, node)
        except ConflictError:
            # The name is taken: read the Node that holds it from the apiserver, not the view,
            # which may not have seen it yet (a retried launch whose first create succeeded).
            name = node.metadata.name or ""
            existing = await self._kube.get(NODES, name)
            if not is_ours(existing):
                msg = f"node {name!r} exists and is not a kwok instance"
                raise CreateError(
                    msg, condition_reason="NodeNameTaken", condition_message=msg
                ) from None
            mine, theirs = launched_for(node), launched_for(existing)
            if mine is not None and theirs is not None and mine != theirs:
                # Left by an earlier NodeClaim of the same name: garbage collection removes it.
                msg = f"node {name!r} is the kwok instance of another nodeclaim"
                raise CreateError(
                    msg, condition_reason="NodeNameTaken", condition_message=msg
                ) from None
            return existing
        return None

    async def delete(self, name: str) -> None:
        """Delete the Node `name`; NotFoundError when there is none."""
        await self._kube.delete(NODES, name)

    async def delete_orphan(self, name: str) -> None:
        """Delete the Node of a launch deleted while its Node was being created; a failure is
        logged, not raised."""
        try:
            await self._kube.delete(NODES, name)
        except NotFoundError:
            return
        except KubeError as error:
            # list() still shows the Node, so garbage collection removes it later.
            log.warning("failed deleting kwok node", extra={"node": name, "error": str(error)})

    # ------------------------------------------------------------------ pending launches

    def pending(self, name: str) -> NodeClaim | None:
        """The launched NodeClaim of the pending launch `name`, if there is one."""
        launch = self._pending.get(name)
        return launch.nodeclaim if launch is not None else None

    def pending_nodeclaims(self) -> Iterator[tuple[str, NodeClaim]]:
        """(Node name, launched NodeClaim) of every pending launch."""
        for name, launch in self._pending.items():
            yield name, launch.nodeclaim

    def hold(self, launch: PendingLaunch) -> None:
        """Record `launch` and wake the launches pass (through `held`), which creates its Node
        when it is due."""
        name = launch.node.metadata.name or ""
        self._pending[name] = launch
        self.held.send(name)

    def drop(self, name: str) -> bool:
        """Forget the pending launch `name`; whether there was one."""
        return self._pending.pop(name, None) is not None

    def due(self, now: float) -> list[tuple[str, PendingLaunch]]:
        """The pending launches due at `now` (event-loop time), earliest first."""
        ordered = sorted(self._pending.items(), key=lambda kv: kv[1].due)
        return [(name, launch) for name, launch in ordered if launch.due <= now]

    def settle(self, name: str, launch: PendingLaunch) -> bool:
        """Forget `launch` once its Node exists (or can never exist); False when it was deleted
        (or replaced) meanwhile."""
        if self._pending.get(name) is not launch:
            return False
        del self._pending[name]
        return True

    def postpone(self, name: str, launch: PendingLaunch, due: float) -> None:
        """Move `launch` to `due`, unless it was deleted (or replaced) meanwhile."""
        if self._pending.get(name) is launch:
            self._pending[name] = attrs.evolve(launch, due=due)

    def next_due(self) -> float | None:
        """When the earliest pending launch falls due (None when there is none)."""
        return min((launch.due for launch in self._pending.values()), default=None)
