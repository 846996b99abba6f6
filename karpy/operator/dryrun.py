"""Shadow mode (`karpy run --dry-run`): every controller decides as it would, and no write
reaches the cluster.

All of karpy's writes go through `KubeClient.request`, so `DryRunKubeClient` overrides that one
method: reads pass, and so do Events (a decision is reported as one) and the leader Lease (two
shadow replicas still elect one leader). Any other write is answered locally, as the apiserver
would answer it: a create echoes the object, a patch returns the current object with the merge
patch applied, a delete or an eviction succeeds. The write is then reported by `DecisionLog`:
logged, evented on the object it concerns (the NodePool a launch is for, the Node a disruption
removes, the pod an eviction moves) and counted in metrics together with the $/h it would add
or save, priced from the cloud provider's offerings.

This is how a Cluster Autoscaler user evaluates karpy on a production cluster: karpy sees the
real pending pods and nodes, and says what it would launch and remove, and at what price.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from karpy.apis.codec import from_dict
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.protocol import CloudProvider
from karpy.kube.client import KubeClient, Query
from karpy.kube.events import Event, EventType, InvolvedObject, Recorder
from karpy.runtime.clock import Clock
from karpy.runtime.telemetry import Telemetry
from karpy.state.view import ClusterView

log = logging.getLogger(__name__)

WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PASSING: Final = ("/events", "/apis/coordination.k8s.io/")
"""Writes that still happen in shadow mode: events (how decisions are reported) and Leases."""
NODECLAIMS_PATH: Final = f"/apis/{wk.GROUP}/v1/nodeclaims"


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch of `patch` onto `target` (as the apiserver applies it)."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


@attrs.frozen(kw_only=True)
class Decision:
    """One write shadow mode withheld, as reported."""

    action: str
    """launch, disrupt, evict, patch, delete or create."""
    kind: str
    name: str
    namespace: str | None = None
    price_per_hour: float | None = None
    """$/h the write would add (launch) or save (disrupt), when it can be priced."""
    detail: str = ""


def _parts(path: str) -> list[str]:
    return [p for p in path.split("?")[0].split("/") if p]


def classify(method: str, path: str, body: Mapping[str, Any] | None) -> Decision:
    """What a withheld write means, from its method, REST path and body (unpriced)."""
    parts = _parts(path)
    namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts else None
    if method == "POST" and parts[-1:] == ["eviction"]:
        return Decision(action="evict", kind="Pod", name=parts[-2], namespace=namespace)
    collection = method == "POST"
    resource = parts[-1] if collection else parts[-2]
    name = ((body or {}).get("metadata") or {}).get("name", "") if collection else parts[-1]
    if resource == "status" or (not collection and parts[-1] == "status"):
        resource, name = parts[-3], parts[-2]
    kind = {"nodeclaims": "NodeClaim", "nodes": "Node", "pods": "Pod", "nodepools": "NodePool"}.get(
        resource, resource
    )
    if collection and kind == "NodeClaim":
        return Decision(action="launch", kind=kind, name=name or "<generated>")
    if method == "DELETE" and kind == "NodeClaim":
        return Decision(action="disrupt", kind=kind, name=name)
    action = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return Decision(action=action, kind=kind, name=name, namespace=namespace)


class DecisionLog:
    """Prices, logs, events and counts what shadow mode withholds."""

    def __init__(
        self,
        view: ClusterView,
        provider: CloudProvider,
        recorder: Recorder,
        telemetry: Telemetry,
        clock: Clock,
    ) -> None:
        self._view = view
        self._provider = provider
        self._recorder = recorder
        self._clock = clock
        self._decisions = telemetry.metrics.dry_run.decisions_total
        self._price = telemetry.metrics.dry_run.price_per_hour_total

    async def _instance_prices(self, nodepool_name: str | None) -> Mapping[str, Sequence[Any]]:
        pool = self._view.nodepool(nodepool_name) if nodepool_name else None
        if pool is None:
            return {}
        return {t.name: t.offerings for t in await self._provider.get_instance_types(pool)}

    async def _launch_price(self, claim: NodeClaim) -> float | None:
        offerings = await self._instance_prices(claim.metadata.labels.get(wk.LABEL_NODEPOOL))
        allowed: dict[str, frozenset[str]] = {}
        for req in claim.spec.requirements:
            if str(req.operator) == "In":
                allowed[req.key] = frozenset(req.values)
        types = allowed.get(wk.LABEL_INSTANCE_TYPE, frozenset(offerings))
        prices = [
            o.price
            for name in types
            for o in offerings.get(name, ())
            if o.available
            and o.zone in allowed.get(wk.LABEL_TOPOLOGY_ZONE, frozenset({o.zone}))
            and o.capacity_type in allowed.get(wk.LABEL_CAPACITY_TYPE, frozenset({o.capacity_type}))
        ]
        return min(prices) if prices else None

    async def _running_price(self, claim: NodeClaim) -> float | None:
        labels = claim.metadata.labels
        offerings = await self._instance_prices(labels.get(wk.LABEL_NODEPOOL))
        prices = [
            o.price
            for o in offerings.get(labels.get(wk.LABEL_INSTANCE_TYPE, ""), ())
            if o.zone == labels.get(wk.LABEL_TOPOLOGY_ZONE)
            and o.capacity_type == labels.get(wk.LABEL_CAPACITY_TYPE)
        ]
        return min(prices) if prices else None

    async def price(self, decision: Decision, body: Mapping[str, Any] | None) -> Decision:
        """`decision` with its $/h and detail, for launches and disruptions."""
        if decision.action == "launch" and body is not None:
            claim = from_dict(NodeClaim, {**body, "kind": "NodeClaim"})
            types = next(
                (r.values for r in claim.spec.requirements if r.key == wk.LABEL_INSTANCE_TYPE), ()
            )
            detail = f"nodepool {claim.metadata.labels.get(wk.LABEL_NODEPOOL)}, instance types "
            detail += ", ".join(list(types)[:5]) + (
                f" and {len(types) - 5} other(s)" if len(types) > 5 else ""
            )
            return attrs.evolve(
                decision, price_per_hour=await self._launch_price(claim), detail=detail
            )
        if decision.action == "disrupt":
            existing = self._view.nodeclaim(decision.name)
            if existing is not None:
                return attrs.evolve(
                    decision,
                    price_per_hour=await self._running_price(existing),
                    detail=f"node {existing.status.node_name or '<unregistered>'}",
                )
        return decision

    def _involved(
        self, decision: Decision, body: Mapping[str, Any] | None
    ) -> InvolvedObject | None:
        if decision.action == "launch" and body is not None:
            pool = self._view.nodepool(
                ((body.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_NODEPOOL, "")
            )
            if pool is None:
                return None
            return InvolvedObject(
                api_version=f"{wk.GROUP}/v1",
                kind="NodePool",
                name=pool.metadata.name or "",
                uid=pool.metadata.uid or "",
            )
        if decision.action == "disrupt":
            claim = self._view.nodeclaim(decision.name)
            node = (
                self._view.node(claim.status.node_name)
                if claim and claim.status.node_name
                else None
            )
            if node is not None:
                return InvolvedObject(
                    api_version="v1",
                    kind="Node",
                    name=node.metadata.name or "",
                    uid=node.metadata.uid or "",
                )
            return None
        if decision.kind in {"Pod", "Node"}:
            obj = (
                self._view.node(decision.name)
                if decision.kind == "Node"
                else next(
                    (
                        p
                        for p in self._view.pods()
                        if p.metadata.name == decision.name
                        and p.metadata.namespace == decision.namespace
                    ),
                    None,
                )
            )
            if obj is not None:
                return InvolvedObject(
                    api_version="v1",
                    kind=decision.kind,
                    name=decision.name,
                    uid=obj.metadata.uid or "",
                    namespace=decision.namespace,
                )
        return None

    async def record(self, method: str, path: str, body: Mapping[str, Any] | None) -> None:
        decision = await self.price(classify(method, path, body), body)
        price = "" if decision.price_per_hour is None else f" ({decision.price_per_hour:.4f} $/h)"
        log.info(
            "dry run: withheld a write",
            extra={
                "action": decision.action,
                "kind": decision.kind,
                "object": decision.name,
                "namespace": decision.namespace,
                "price_per_hour": decision.price_per_hour,
                "detail": decision.detail,
                "method": method,
                "path": path,
            },
        )
        attributes = {"action": decision.action, "kind": decision.kind}
        self._decisions.add(1, attributes)
        if decision.price_per_hour is not None:
            self._price.add(decision.price_per_hour, attributes)
        involved = self._involved(decision, body)
        if involved is not None:
            verb = {"launch": "launch", "disrupt": "remove", "evict": "evict"}.get(
                decision.action, decision.action
            )
            message = f"dry run: would {verb} {decision.kind} {decision.name}{price}"
            if decision.detail:
                message += f"; {decision.detail}"
            await self._recorder.publish(
                Event(
                    involved=involved,
                    type=EventType.NORMAL,
                    reason=f"DryRun{decision.action.capitalize()}",
                    message=message,
                ),
                now=self._clock.now().timestamp(),
            )


class DryRunKubeClient(KubeClient):
    """A KubeClient that reads and withholds writes (see the module docstring). `decisions`
    is attached by wiring once the provider and the cluster view exist."""

    decisions: DecisionLog | None = None
    _sequence = itertools.count(1)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Mapping[str, Any]:
        if method not in WRITES or any(marker in path for marker in PASSING):
            return await super().request(
                method, path, query=query, body=body, content_type=content_type
            )
        answer = await self._answer(method, path, body)
        if self.decisions is not None:
            await self.decisions.record(method, path, body)
        return answer

    async def _answer(
        self, method: str, path: str, body: Mapping[str, Any] | None
    ) -> Mapping[str, Any]:
        """What the apiserver would have answered, without writing."""
        if method == "DELETE" or path.endswith("/eviction"):
            return {"kind": "Status", "status": "Success"}
        if method == "POST":
            created = dict(body or {})
            metadata = dict(created.get("metadata") or {})
            number = next(self._sequence)
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = f"{metadata['generateName']}dryrun{number}"
            metadata.setdefault("uid", f"dry-run-{number}")
            metadata.setdefault("resourceVersion", "0")
            created["metadata"] = metadata
            return created
        target = path.removesuffix("/status")
        current = await super().request("GET", target)
        patch = dict(body or {})
        patch_meta = dict(patch.get("metadata") or {})
        patch_meta.pop("resourceVersion", None)  # the optimistic precondition, not a change
        if patch_meta:
            patch["metadata"] = patch_meta
        else:
            patch.pop("metadata", None)
        return dict(merge(current, patch))
