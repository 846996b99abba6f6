"""Apply manifests and install CRDs: what `karpy demo` (and an installer) needs beyond typed kinds.

Server-side apply with a field manager makes every call idempotent, so a demo or installer can
run twice against the same cluster. Manifests go in as plain mappings — the shape users write
in YAML — and nothing raw comes back out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpy.kube.client import KubeClient

FIELD_MANAGER: Final = "karpy"
APPLY_PATCH: Final = "application/apply-patch+yaml"


def object_path(manifest: Mapping[str, Any]) -> str:
    """REST path of the object a manifest describes (namespace from its metadata, if any)."""
    api_version = str(manifest["apiVersion"])
    kind = str(manifest["kind"])
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name")
    if not name:
        raise ValueError(f"{kind}: metadata.name is required to apply a manifest")
    lower = kind.lower()
    plural = _PLURALS.get(kind) or (f"{lower}es" if lower.endswith("s") else f"{lower}s")
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    namespace = metadata.get("namespace")
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{plural}/{name}"


_PLURALS: Final = {
    "CustomResourceDefinition": "customresourcedefinitions",
    "NodePool": "nodepools",
    "NodeClaim": "nodeclaims",
    "EC2NodeClass": "ec2nodeclasses",
    "KWOKNodeClass": "kwoknodeclasses",
    "Deployment": "deployments",
}


async def apply(client: KubeClient, manifest: Mapping[str, Any]) -> None:
    """Create or update one object from its manifest (server-side apply, forced)."""
    await client.request(
        "PATCH",
        object_path(manifest),
        query=(("fieldManager", FIELD_MANAGER), ("force", "true")),
        body=manifest,
        content_type=APPLY_PATCH,
    )


async def scale(client: KubeClient, manifest: Mapping[str, Any], replicas: int) -> None:
    """Set a workload's replica count through its scale subresource."""
    await client.request(
        "PATCH",
        object_path(manifest) + "/scale",
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
    )


#: Seconds between checks while waiting for CRDs to be Established (about 0.1 s in practice).
ESTABLISHED_POLL = 0.1


async def install_crds(client: KubeClient, crds: Sequence[Mapping[str, Any]]) -> None:
    """Apply each CRD and wait until the apiserver reports all of them Established.

    Callers bound the wait with ``asyncio.timeout``.
    """
    for crd in crds:
        await apply(client, crd)
    pending = list(crds)
    while pending:
        pending = [crd for crd in pending if not await _established(client, crd)]
        if pending:
            await asyncio.sleep(ESTABLISHED_POLL)


async def _established(client: KubeClient, crd: Mapping[str, Any]) -> bool:
    stored = await client.request("GET", object_path(crd))
    conditions = (stored.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
