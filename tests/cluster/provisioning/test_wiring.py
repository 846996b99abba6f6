"""The composition root registers the provisioning pipeline and the provider's hooks.

`karpy run` must build the provider named by `--provider` (through the `karpy.providers` entry
points, wrapped for spans and metrics), inform the NodeClaim and NodePool kinds, and register
the provisioner fed by the pod informer; a provider's background `run()` joins the controllers.
"""

from __future__ import annotations

import asyncio
import secrets

import attrs
import pytest

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.cloudprovider.instrumented import InstrumentedCloudProvider
from karpy.cloudprovider.overlay import OverlaidCloudProvider
from karpy.cloudprovider.registry import UnknownProviderError
from karpy.kube.client import KubeClient
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, PODS
from karpy.localcluster import ClusterInfo
from karpy.operator.supervisor import Supervisor
from karpy.operator.wiring import build
from karpy.runtime.options import Options, load
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.apis.kinds import KWOK_NODECLASSES
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from tests.cluster.provisioning.harness import make_nodepool, pod_body
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")


def _options(cluster_info: ClusterInfo, *extra: str) -> Options:
    argv = [
        "--kubeconfig",
        str(cluster_info.kubeconfig),
        "--disable-leader-election",
        "--bind-address",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--health-probe-port",
        "0",
        *extra,
    ]
    return load(argv, {})


async def test_build_with_kwok_registers_the_provisioner_and_the_provider_loop(
    cluster_info: ClusterInfo,
) -> None:
    components = await build(_options(cluster_info, "--provider", "kwok", "--cluster-name", "t"))
    try:
        assert {i.kind for i in components.informers} == {
            "Node",
            "Pod",
            "NodeClaim",
            "NodePool",
            "NodeOverlay",  # watched whatever its gate, so one stored while it is off is reported
            "DaemonSet",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "StorageClass",
            "PodDisruptionBudget",
            "VolumeAttachment",  # termination waits for a node's volumes to detach
            "Provisioner",  # the v0.x kind, kept as an owned NodePool
            "KWOKNodeClass",  # the kind the provider owns, informed like the core kinds
        }
        provider = components.cloudprovider
        assert isinstance(provider, InstrumentedCloudProvider)
        assert provider.name == "kwok"
        names = [c.name for c in components.controllers]
        assert names.count("provisioning.provisioner") == 1
        assert "kwok.launches" in names  # the provider's declared loop, run by the manager
        assert {"nodeclaim.lifecycle", "nodeclaim.garbagecollection", "node.termination"} <= set(
            names
        )
        assert {"disruption", "disruption.queue", "nodeclaim.podevents"} <= set(names)
        assert "nodeoverlay" in names
    finally:
        await components.close()


async def test_the_node_overlay_gate_wraps_the_provider_every_controller_reads(
    cluster_info: ClusterInfo,
) -> None:
    options = load(
        [
            *("--kubeconfig", str(cluster_info.kubeconfig), "--disable-leader-election"),
            *("--bind-address", "127.0.0.1", "--metrics-port", "0", "--health-probe-port", "0"),
        ],
        {"FEATURE_GATES": "NodeOverlay=true"},
    )
    components = await build(options)
    try:
        provider = components.cloudprovider
        assert isinstance(provider, OverlaidCloudProvider)
        assert isinstance(provider.inner, InstrumentedCloudProvider)
    finally:
        await components.close()


async def test_build_refuses_an_unknown_provider_naming_the_installed_ones(
    cluster_info: ClusterInfo,
) -> None:
    with pytest.raises(UnknownProviderError, match="'nope'") as caught:
        await build(_options(cluster_info, "--provider", "nope"))
    assert "kwok" in caught.value.available


async def test_karpy_run_turns_a_pending_pod_into_a_nodeclaim_with_the_kwok_provider(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    options = _options(cluster_info, "--batch-idle-duration", "200ms", "--batch-max-duration", "2s")
    components = await build(options)
    kube = components.client
    intent = f"apps-{secrets.token_hex(3)}"
    pool = make_nodepool(f"pool-{secrets.token_hex(3)}", intent)
    ref = NodeClassReference(group=kwoklabels.KWOK_GROUP, kind=KWOKNodeClass.KIND, name="default")
    template = attrs.evolve(
        pool.spec.template, spec=attrs.evolve(pool.spec.template.spec, node_class_ref=ref)
    )
    pool = attrs.evolve(pool, spec=attrs.evolve(pool.spec, template=template))
    stop = asyncio.Event()
    try:
        # The lifecycle controller launches what the provisioner creates: the class must exist.
        await kube.create(KWOK_NODECLASSES, KWOKNodeClass(metadata=ObjectMeta(name=ref.name)))
        await kube.create(NODEPOOLS, pool)
        async with asyncio.TaskGroup() as group:
            supervised = group.create_task(Supervisor(components, stop=stop).run())
            try:
                await kube.create_raw(
                    PODS, pod_body("walkthrough", cpu="1", intent=intent), namespace=namespace
                )
                claims = await eventually(lambda: _claims_of(kube, pool.metadata.name), within=90)
            finally:
                stop.set()
            async with asyncio.timeout(30):
                await supervised
    finally:
        await components.close()
    (claim,) = claims
    assert claim.metadata.labels[wk.LABEL_NODEPOOL] == pool.metadata.name
    assert claim.spec.node_class_ref == ref


async def _claims_of(kube: KubeClient, pool: str | None) -> list[NodeClaim]:
    listed = await kube.list(NODECLAIMS)
    return [i.obj for i in listed.items if i.obj.metadata.labels.get(wk.LABEL_NODEPOOL) == pool]


def test_provider_options_default_to_kwok_and_read_their_environment() -> None:
    defaults = load([], {})
    assert (defaults.provider.name, defaults.provider.cluster_name) == ("kwok", "karpy")
    options = load([], {"KARPY_PROVIDER": "aws", "CLUSTER_NAME": "prod"})
    assert (options.provider.name, options.provider.cluster_name) == ("aws", "prod")
    flagged = load(["--provider", "fake"], {"KARPY_PROVIDER": "aws"})
    assert flagged.provider.name == "fake"
