"""KubeClient writes on the real apiserver: create, merge patch, status patch, finalizers.

Each write is checked against what the apiserver then serves, for a core kind (Node) and the
karpy CRDs (NodeClaim, KWOKNodeClass), including the failure kinds controllers decide on:
ConflictError for an existing name or a stale version, NotFoundError for a missing object.
"""

from __future__ import annotations

import pytest

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeSpec, NodeStatus
from karpy.apis.kube.pod import Container, Pod, PodSpec
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClaimRequirement, NodeClassReference, RequirementOperator
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.kube.kinds import NODECLAIMS, NODES, PODS
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.apis.kwoknodeclass import READY_SINCE

pytestmark = pytest.mark.usefixtures("karpy_crds")


def _node(name: str) -> Node:
    return Node(
        metadata=ObjectMeta(name=name, labels={wk.LABEL_HOSTNAME: name}),
        spec=NodeSpec(
            provider_id=f"test://{name}",
            taints=(Taint(key=wk.TAINT_UNREGISTERED_KEY, effect=TaintEffect.NO_EXECUTE),),
        ),
        status=NodeStatus(capacity={"cpu": Quantity("2"), "pods": Quantity("10")}),
    )


def _nodeclaim(name: str) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(name=name, labels={wk.LABEL_NODEPOOL: "default"}),
        spec=NodeClaimSpec(
            requirements=(
                NodeClaimRequirement(
                    key=wk.LABEL_CAPACITY_TYPE,
                    operator=RequirementOperator.IN,
                    values=(wk.CAPACITY_TYPE_SPOT,),
                ),
            ),
            node_class_ref=NodeClassReference(
                group=kwoklabels.KWOK_GROUP, kind="KWOKNodeClass", name="default"
            ),
        ),
    )


async def test_create_returns_the_stored_node_and_a_second_create_conflicts(
    kube: KubeClient,
) -> None:
    created = await kube.create(NODES, _node("write-node-a"))
    assert created.metadata.uid
    assert created.spec.provider_id == "test://write-node-a"
    assert created.spec.taints[0].key == wk.TAINT_UNREGISTERED_KEY
    assert created.status.capacity["cpu"] == "2"
    stored = await kube.get(NODES, "write-node-a")
    # Only what no controller rewrites: the controller-manager may add a not-ready taint.
    assert (stored.metadata.uid, stored.spec.provider_id) == (
        created.metadata.uid,
        created.spec.provider_id,
    )
    with pytest.raises(ConflictError):
        await kube.create(NODES, _node("write-node-a"))


async def test_create_refuses_a_model_of_another_kind(kube: KubeClient) -> None:
    with pytest.raises(ValueError, match="cannot create a NodeClaim through the Node endpoint"):
        await kube.create(NODES, _nodeclaim("wrong"))


async def test_merge_patch_changes_only_named_fields(kube: KubeClient) -> None:
    await kube.create(NODES, _node("write-node-b"))
    patched = await kube.merge_patch(
        NODES, "write-node-b", {"metadata": {"labels": {"extra": "yes"}}}
    )
    assert patched.metadata.labels == {wk.LABEL_HOSTNAME: "write-node-b", "extra": "yes"}
    removed = await kube.merge_patch(
        NODES, "write-node-b", {"metadata": {"labels": {"extra": None}}}
    )
    assert "extra" not in removed.metadata.labels


async def test_merge_patch_with_a_stale_version_is_a_conflict(kube: KubeClient) -> None:
    # A NodeClaim, because the controller-manager keeps writing to fresh Nodes.
    created = await kube.create(NODECLAIMS, _nodeclaim("write-claim-c"))
    version = created.metadata.resource_version
    assert version is not None
    patch = {"metadata": {"labels": {"a": "1"}}}
    fresh = await kube.merge_patch(NODECLAIMS, "write-claim-c", patch, resource_version=version)
    assert fresh.metadata.resource_version != version
    with pytest.raises(ConflictError):
        await kube.merge_patch(
            NODECLAIMS,
            "write-claim-c",
            {"metadata": {"labels": {"b": "2"}}},
            resource_version=version,
        )
    assert "b" not in (await kube.get(NODECLAIMS, "write-claim-c")).metadata.labels


async def test_patch_of_a_missing_object_is_not_found(kube: KubeClient) -> None:
    with pytest.raises(NotFoundError):
        await kube.merge_patch(NODES, "write-missing", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(NotFoundError):
        await kube.patch_status(NODECLAIMS, "write-missing", NodeClaimStatus(node_name="x"))


async def test_nodeclaim_status_patch_writes_the_subresource_only(kube: KubeClient) -> None:
    created = await kube.create(NODECLAIMS, _nodeclaim("write-claim-a"))
    assert created.status.provider_id is None
    launched = Condition(
        type="Launched",
        status=ConditionStatus.TRUE,
        last_transition_time=created.metadata.creation_timestamp or READY_SINCE,
        reason="Launched",
    )
    status = NodeClaimStatus(
        provider_id="kwok://write-claim-a",
        capacity={"cpu": Quantity("4")},
        conditions=(launched,),
    )
    patched = await kube.patch_status(
        NODECLAIMS, "write-claim-a", status, resource_version=created.metadata.resource_version
    )
    assert patched.status.provider_id == "kwok://write-claim-a"
    assert patched.status.capacity == {"cpu": "4"}
    assert [c.type for c in patched.status.conditions] == ["Launched"]
    assert patched.spec == created.spec
    with pytest.raises(ConflictError):
        await kube.patch_status(
            NODECLAIMS,
            "write-claim-a",
            NodeClaimStatus(node_name="late"),
            resource_version=created.metadata.resource_version,
        )
    # A status patch through the main resource is ignored by the apiserver (status subresource).
    await kube.merge_patch(NODECLAIMS, "write-claim-a", {"status": {"nodeName": "ignored"}})
    assert (await kube.get(NODECLAIMS, "write-claim-a")).status.node_name is None


async def test_finalizers_are_added_and_removed_idempotently(kube: KubeClient) -> None:
    created = await kube.create(NODECLAIMS, _nodeclaim("write-claim-b"))
    added = await kube.add_finalizer(NODECLAIMS, created, wk.FINALIZER_TERMINATION)
    assert added.metadata.finalizers == (wk.FINALIZER_TERMINATION,)
    again = await kube.add_finalizer(NODECLAIMS, added, wk.FINALIZER_TERMINATION)
    assert again.metadata.resource_version == added.metadata.resource_version
    other = await kube.add_finalizer(NODECLAIMS, again, "example.com/other")
    assert other.metadata.finalizers == (wk.FINALIZER_TERMINATION, "example.com/other")
    kept = await kube.remove_finalizer(NODECLAIMS, other, wk.FINALIZER_TERMINATION)
    assert kept.metadata.finalizers == ("example.com/other",)
    same = await kube.remove_finalizer(NODECLAIMS, kept, wk.FINALIZER_TERMINATION)
    assert same.metadata.resource_version == kept.metadata.resource_version
    assert (await kube.get(NODECLAIMS, "write-claim-b")).metadata.finalizers == (
        "example.com/other",
    )


async def test_a_finalizer_edit_from_a_stale_read_conflicts(kube: KubeClient) -> None:
    created = await kube.create(NODECLAIMS, _nodeclaim("write-claim-stale"))
    await kube.add_finalizer(NODECLAIMS, created, "example.com/first")
    with pytest.raises(ConflictError):
        await kube.add_finalizer(NODECLAIMS, created, wk.FINALIZER_TERMINATION)
    assert (await kube.get(NODECLAIMS, "write-claim-stale")).metadata.finalizers == (
        "example.com/first",
    )


async def test_removing_the_last_finalizer_releases_a_deleted_object(kube: KubeClient) -> None:
    created = await kube.create(NODECLAIMS, _nodeclaim("write-claim-d"))
    await kube.add_finalizer(NODECLAIMS, created, wk.FINALIZER_TERMINATION)
    await kube.delete(NODECLAIMS, "write-claim-d")
    held = await kube.get(NODECLAIMS, "write-claim-d")
    assert held.metadata.deletion_timestamp is not None
    await kube.remove_finalizer(NODECLAIMS, held, wk.FINALIZER_TERMINATION)
    with pytest.raises(NotFoundError):
        await kube.get(NODECLAIMS, "write-claim-d")
    with pytest.raises(NotFoundError):
        await kube.add_finalizer(NODECLAIMS, created, wk.FINALIZER_TERMINATION)


async def test_namespaced_kinds_are_created_and_patched_in_their_namespace(
    kube: KubeClient, namespace: str
) -> None:
    pod = Pod(
        metadata=ObjectMeta(name="write-pod"),
        # No scheduler by that name exists, so nothing else writes the pod during the test.
        spec=PodSpec(
            containers=(Container(name="main", image="example.invalid/app:1"),),
            scheduler_name="write-test-nobody",
        ),
    )
    with pytest.raises(ValueError, match="a namespace is required"):
        await kube.create(PODS, pod)
    created = await kube.create(PODS, pod, namespace=namespace)
    assert created.metadata.namespace == namespace
    patched = await kube.merge_patch(
        PODS,
        "write-pod",
        {"metadata": {"annotations": {wk.ANNOTATION_DO_NOT_DISRUPT: "true"}}},
        namespace=namespace,
        resource_version=created.metadata.resource_version,
    )
    assert patched.metadata.annotations[wk.ANNOTATION_DO_NOT_DISRUPT] == "true"
    with_finalizer = await kube.add_finalizer(PODS, patched, "example.com/hold")
    assert with_finalizer.metadata.finalizers == ("example.com/hold",)
    released = await kube.remove_finalizer(PODS, with_finalizer, "example.com/hold")
    assert released.metadata.finalizers == ()
