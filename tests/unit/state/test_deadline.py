"""A deleted NodeClaim's termination deadline (pure)."""

from __future__ import annotations

import datetime

import attrs
import pytest

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.state.deadline import termination_deadline

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
REF = NodeClassReference(group="g", kind="K", name="n")


def _claim(
    *, grace: str | None, deleted: datetime.datetime | None = None, annotation: str | None = None
) -> NodeClaim:
    annotations = {wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: annotation} if annotation else {}
    return NodeClaim(
        metadata=ObjectMeta(name="c", deletion_timestamp=deleted, annotations=annotations),
        spec=NodeClaimSpec(requirements=(), node_class_ref=REF, termination_grace_period=grace),
    )


def test_deletion_plus_grace_period() -> None:
    assert termination_deadline(_claim(grace="1h30m", deleted=T0)) == T0 + datetime.timedelta(
        minutes=90
    )


def test_the_nodes_deletion_stands_in_until_the_nodeclaims_is_seen() -> None:
    later = T0 + datetime.timedelta(seconds=5)
    claim = _claim(grace="2m")
    assert termination_deadline(claim) is None
    assert termination_deadline(claim, deleted_at=later) == later + datetime.timedelta(minutes=2)


def test_the_recorded_annotation_wins() -> None:
    claim = _claim(grace="2m", deleted=T0, annotation="2026-01-01T00:10:00Z")
    assert termination_deadline(claim) == T0 + datetime.timedelta(minutes=10)


def test_no_grace_period_means_no_deadline() -> None:
    assert termination_deadline(_claim(grace=None, deleted=T0)) is None


def test_a_malformed_annotation_names_the_nodeclaim() -> None:
    claim = _claim(grace="2m", deleted=T0, annotation="soon")
    with pytest.raises(ValueError, match=r"nodeclaim 'c': annotation karpenter\.sh/nodeclaim"):
        termination_deadline(claim)
    bad_grace = attrs.evolve(
        claim,
        metadata=attrs.evolve(claim.metadata, annotations={}),
        spec=attrs.evolve(claim.spec, termination_grace_period="a while"),
    )
    with pytest.raises(ValueError, match=r"spec\.terminationGracePeriod"):
        termination_deadline(bad_grace)
