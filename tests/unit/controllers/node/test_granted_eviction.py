"""A granted eviction whose pod deletion never happened (pure): the PDB of the pod's namespace
lists the pod among its disruptedPods since the pod's creation, and the pod is not being
deleted; an entry older than the pod, or in another namespace, is someone else's."""

from __future__ import annotations

import datetime

import attrs

from karpy.apis.kube.pod import Pod
from karpy.apis.kube.workloads import PodDisruptionBudget, PodDisruptionBudgetStatus
from karpy.apis.meta import ObjectMeta
from karpy.controllers.node.termination.eviction import granted

CREATED = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def _pod(*, deleting: bool = False) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name="web-0",
            namespace="shop",
            creation_timestamp=CREATED,
            deletion_timestamp=CREATED + datetime.timedelta(minutes=1) if deleting else None,
        )
    )


def _pdb(namespace: str, disrupted: dict[str, datetime.datetime]) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        metadata=ObjectMeta(name="web", namespace=namespace),
        status=PodDisruptionBudgetStatus(disrupted_pods=disrupted),
    )


def test_a_pod_listed_since_its_creation_had_its_eviction_granted() -> None:
    later = CREATED + datetime.timedelta(seconds=5)
    assert granted(_pod(), [_pdb("shop", {"web-0": later})])
    assert granted(_pod(), [_pdb("other", {}), _pdb("shop", {"web-0": CREATED})])


def test_an_entry_for_an_earlier_pod_of_the_name_another_namespace_or_none_is_not() -> None:
    earlier = CREATED - datetime.timedelta(seconds=5)
    later = CREATED + datetime.timedelta(seconds=5)
    assert not granted(_pod(), [_pdb("shop", {"web-0": earlier})])
    assert not granted(_pod(), [_pdb("other", {"web-0": later})])
    assert not granted(_pod(), [_pdb("shop", {"web-1": later})])
    assert not granted(_pod(), [])


def test_a_pod_already_being_deleted_needs_nothing_more() -> None:
    later = CREATED + datetime.timedelta(seconds=5)
    assert not granted(_pod(deleting=True), [_pdb("shop", {"web-0": later})])
    unnamed = attrs.evolve(_pod(), metadata=attrs.evolve(_pod().metadata, creation_timestamp=None))
    assert granted(unnamed, [_pdb("shop", {"web-0": later})])
