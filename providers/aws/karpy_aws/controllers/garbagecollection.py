"""Leaked-instance garbage collection: cluster instances that no NodeClaim stands for.

An instance can outlive its NodeClaim — the NodeClaim was deleted while CreateFleet was still
answering, or karpy restarted between launch and writing the provider id. Such an instance costs
money and never joins as a managed node, so Karpenter terminates instances that carry the
cluster's tags, have no NodeClaim and launched more than 30 seconds ago (the grace covers a
launch whose NodeClaim update is still on its way). The caller passes the provider ids its
NodeClaims hold and deletes any Node the terminated instances had.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Collection
from typing import Final

from karpy.apis.v1 import labels as wk
from karpy.runtime.clock import Clock
from karpy_aws.providers.instance import Instances

LEAK_GRACE_PERIOD: Final = datetime.timedelta(seconds=30)
TERMINATE_BATCH: Final = 500

log = logging.getLogger(__name__)


async def collect_leaked_instances(
    instances: Instances,
    nodeclaim_provider_ids: Collection[str],
    *,
    clock: Clock,
    grace: datetime.timedelta = LEAK_GRACE_PERIOD,
) -> tuple[str, ...]:
    """Terminate this cluster's live instances whose provider id no NodeClaim holds and that
    launched more than ``grace`` ago (instances already shutting down are left alone).

    Returns the provider ids terminated, sorted. Raises karpy_aws.errors.AWSError if listing or
    terminating fails (nothing is retried here; the caller's loop runs again).
    """
    known = frozenset(nodeclaim_provider_ids)
    cutoff = clock.now() - grace
    leaked = [
        i
        for i in await instances.list()
        if i.provider_id not in known and i.launch_time < cutoff and i.state != "shutting-down"
    ]
    for start in range(0, len(leaked), TERMINATE_BATCH):
        await instances.terminate([i.id for i in leaked[start : start + TERMINATE_BATCH]])
    for instance in leaked:
        log.info(
            "garbage collected cloudprovider instance",
            extra={
                "provider_id": instance.provider_id,
                "instance_type": instance.instance_type,
                "nodepool": instance.tags.get(wk.LABEL_NODEPOOL, ""),
            },
        )
    return tuple(sorted(i.provider_id for i in leaked))
