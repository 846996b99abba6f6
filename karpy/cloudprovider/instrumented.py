"""A CloudProvider wrapper that traces and measures every call of any provider.

Providers should not each re-implement spans and metrics (and drift in naming while doing it):
wiring wraps whichever provider was chosen in `InstrumentedCloudProvider`, which opens one span
per call named ``cloudprovider.<Method>`` (Karpenter's method names), records the call's duration
in ``karpenter_cloudprovider_duration_seconds`` and each failure in
``karpenter_cloudprovider_errors_total`` labelled with the error's type. The wrapper is itself a
CloudProvider, so controllers cannot tell the difference.

``NodeClaimNotFoundError`` is counted as an error, but it is the normal end of ``Delete`` and the
normal answer of ``Get`` for a gone instance, so it does not mark the span as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Final

from opentelemetry.trace import Span, Status, StatusCode

from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.cloudprovider.errors import NodeClaimNotFoundError
from karpy.cloudprovider.protocol import CloudProvider, DriftReason, NodeClassKind, RepairPolicy
from karpy.core.instancetypes import InstanceType
from karpy.runtime.telemetry import Telemetry

ATTR_PROVIDER: Final = "karpy.provider"
ATTR_NODECLAIM: Final = "karpy.nodeclaim"
ATTR_NODEPOOL: Final = "karpy.nodepool"
ATTR_PROVIDER_ID: Final = "karpy.provider_id"
ATTR_INSTANCE_TYPES: Final = "karpy.instance_types"
ATTR_NODECLAIMS: Final = "karpy.nodeclaims"
ATTR_DRIFTED: Final = "karpy.drifted"


class InstrumentedCloudProvider:
    """`inner`, with a span, a duration sample and (on failure) an error count per call.

    Side effects: records spans and metrics through `telemetry`; otherwise exactly `inner`.
    """

    def __init__(self, inner: CloudProvider, telemetry: Telemetry) -> None:
        self._inner = inner
        self._telemetry = telemetry

    @property
    def inner(self) -> CloudProvider:
        """The wrapped provider."""
        return self._inner

    @property
    def name(self) -> str:
        return self._inner.name

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        with self._call("Create", {ATTR_NODECLAIM: _name(nodeclaim)}) as span:
            launched = await self._inner.create(nodeclaim)
            span.set_attribute(ATTR_PROVIDER_ID, launched.status.provider_id or "")
            return launched

    async def delete(self, nodeclaim: NodeClaim) -> None:
        attributes = {
            ATTR_NODECLAIM: _name(nodeclaim),
            ATTR_PROVIDER_ID: nodeclaim.status.provider_id or "",
        }
        with self._call("Delete", attributes):
            await self._inner.delete(nodeclaim)

    async def get(self, provider_id: str) -> NodeClaim:
        with self._call("Get", {ATTR_PROVIDER_ID: provider_id}) as span:
            found = await self._inner.get(provider_id)
            span.set_attribute(ATTR_NODECLAIM, _name(found))
            return found

    async def list(self) -> Sequence[NodeClaim]:
        with self._call("List", {}) as span:
            listed = await self._inner.list()
            span.set_attribute(ATTR_NODECLAIMS, len(listed))
            return listed

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        with self._call("GetInstanceTypes", {ATTR_NODEPOOL: nodepool.metadata.name or ""}) as span:
            types = await self._inner.get_instance_types(nodepool)
            span.set_attribute(ATTR_INSTANCE_TYPES, len(types))
            return types

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        attributes = {
            ATTR_NODECLAIM: _name(nodeclaim),
            ATTR_PROVIDER_ID: nodeclaim.status.provider_id or "",
        }
        with self._call("IsDrifted", attributes) as span:
            reason = await self._inner.is_drifted(nodeclaim)
            span.set_attribute(ATTR_DRIFTED, reason or "")
            return reason

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        return self._inner.repair_policies()

    def supported_node_classes(self) -> tuple[NodeClassKind, ...]:
        return self._inner.supported_node_classes()

    def well_known_labels(self) -> frozenset[str]:
        return self._inner.well_known_labels()

    @contextlib.contextmanager
    def _call(self, method: str, attributes: dict[str, str]) -> Iterator[Span]:
        metrics = self._telemetry.metrics
        labels = {"method": method, "provider": self._inner.name}
        loop = asyncio.get_running_loop()
        started = loop.time()
        with self._telemetry.tracer.start_as_current_span(
            f"cloudprovider.{method}",
            attributes={ATTR_PROVIDER: self._inner.name, **attributes},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except Exception as error:
                span.record_exception(error)
                if not isinstance(error, NodeClaimNotFoundError):
                    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                metrics.cloudprovider_errors_total.add(1, {**labels, "error": type(error).__name__})
                raise
            finally:
                metrics.cloudprovider_duration_seconds.record(loop.time() - started, labels)


def _name(nodeclaim: NodeClaim) -> str:
    return nodeclaim.metadata.name or ""
