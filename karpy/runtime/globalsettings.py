"""Karpenter v0.x's `karpenter-global-settings` ConfigMap, as options.

v0.x clusters configured Karpenter through that ConfigMap (aws.clusterName, batchIdleDuration,
...). karpy reads it when present and turns each key it understands into the environment
variable karpy reads for the same setting, under the real environment and flags, so an explicit
flag or variable always wins. Keys karpy has no setting for are returned by name, to be logged,
never dropped in silence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

GLOBAL_SETTINGS_NAME: Final = "karpenter-global-settings"

ENV_OF_KEY: Final = {
    "aws.clusterName": "CLUSTER_NAME",
    "aws.clusterEndpoint": "CLUSTER_ENDPOINT",
    "aws.defaultInstanceProfile": "AWS_DEFAULT_INSTANCE_PROFILE",
    "aws.interruptionQueueName": "INTERRUPTION_QUEUE",
    "aws.isolatedVPC": "ISOLATED_VPC",
    "aws.reservedENIs": "RESERVED_ENIS",
    "aws.vmMemoryOverheadPercent": "VM_MEMORY_OVERHEAD_PERCENT",
    "batchIdleDuration": "BATCH_IDLE_DURATION",
    "batchMaxDuration": "BATCH_MAX_DURATION",
}
"""v0.x key -> the variable karpy reads for the same setting."""


def environ_with_global_settings(
    data: Mapping[str, str], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """`environ` over the ConfigMap's settings, and the ConfigMap keys karpy does not carry."""
    merged: dict[str, str] = {}
    ignored: list[str] = []
    for key, value in sorted(data.items()):
        env = ENV_OF_KEY.get(key)
        if env is None:
            ignored.append(key)
        elif value != "":
            merged[env] = value
    merged.update(environ)
    return merged, ignored
