"""Event targets built from objects, and the per-package constructors' wording (pure)."""

from __future__ import annotations

import datetime

from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.controllers.disruption import events as disruption
from karpy.controllers.legacy import events as legacy
from karpy.controllers.node.termination import events as termination
from karpy.controllers.nodeclaim import events as nodeclaim
from karpy.kube.events import EventType, InvolvedObject, involved
from karpy.kube.kinds import NODECLAIMS, NODES, PODS, PROVISIONERS

POD = Pod(metadata=ObjectMeta(name="p", namespace="apps", uid="u-pod"))
NODE = Node(metadata=ObjectMeta(name="n", uid="u-node"))
CLAIM = NodeClaim(
    metadata=ObjectMeta(name="c", uid="u-claim"),
    spec=NodeClaimSpec(
        requirements=(),
        node_class_ref=NodeClassReference(group="g", kind="K", name="n"),
        expire_after="720h",
    ),
)


def test_a_target_names_the_kind_and_the_object_and_a_namespace_only_when_namespaced() -> None:
    assert involved(PODS, POD) == InvolvedObject(
        api_version="v1", kind="Pod", name="p", uid="u-pod", namespace="apps"
    )
    assert involved(NODECLAIMS, CLAIM) == InvolvedObject(
        api_version="karpenter.sh/v1", kind="NodeClaim", name="c", uid="u-claim"
    )
    stray = Node(metadata=ObjectMeta(name="n", uid="u-node", namespace="ignored"))
    assert involved(NODES, stray).namespace is None


def test_constructors_keep_the_words_users_read() -> None:
    deadline = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    expiring = termination.grace_period_expiring(POD, deadline, grace=30, own=30)
    assert (expiring.type, expiring.reason, expiring.message) == (
        EventType.WARNING,
        "TerminationGracePeriodExpiring",
        "Deleting the pod to accommodate the terminationTime 2026-01-01T00:00:00+00:00 of the"
        " node. The pod was granted 30 seconds of grace-period of its 30"
        " terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt"
        " annotation.",
    )
    awaiting = termination.awaiting_volume_detachment(NODE, 2)
    assert (awaiting.involved.kind, awaiting.type, awaiting.reason, awaiting.message) == (
        "Node",
        EventType.WARNING,
        "AwaitingVolumeDetachment",
        "Awaiting deletion of 2 VolumeAttachments bound to node",
    )
    expired = nodeclaim.expired_terminating(CLAIM)
    assert (expired.reason, expired.message) == (
        "DisruptionTerminating",
        "Disrupting NodeClaim: Expired (expireAfter 720h)",
    )
    on_node = disruption.on_node(NODE, "DisruptionTerminating", "Disrupting NodeClaim: Empty")
    assert (on_node.involved.kind, on_node.message) == ("Node", "Disrupting Node: Empty")


def test_a_legacy_translation_event_names_the_v1alpha5_object_and_keeps_1024_characters() -> None:
    provisioner = Provisioner(metadata=ObjectMeta(name="default", uid="u-prov"))
    failed = legacy.translation_failed(PROVISIONERS, provisioner, "x" * 2000)
    assert failed.involved == InvolvedObject(
        api_version="karpenter.sh/v1alpha5", kind="Provisioner", name="default", uid="u-prov"
    )
    assert (failed.type, failed.reason, len(failed.message)) == (
        EventType.WARNING,
        "TranslationFailed",
        1024,
    )
