"""The NodePool hash and static/requirement drift: stable, blind to requirements and to order,
sensitive to every hashed field; drift compared only within one hash version."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk
from karpy.core.drift import (
    HASH_VERSION,
    DriftReason,
    TaintFields,
    TemplateFields,
    rehash_annotations,
    requirements_drift,
    static_drift,
    template_hash,
)
from karpy.core.requirements import Requirement, Requirements

names = st.text(st.sampled_from("abcxyz-"), min_size=1, max_size=6)
taints = st.builds(
    TaintFields,
    key=names,
    value=st.sampled_from(["", "a", "b"]),
    effect=st.sampled_from(["NoSchedule", "NoExecute"]),
)
seconds = st.one_of(st.none(), st.integers(1, 10**6).map(float))
templates = st.builds(
    TemplateFields,
    labels=st.dictionaries(names, names, max_size=3),
    annotations=st.dictionaries(names, names, max_size=3),
    taints=st.lists(taints, max_size=3).map(tuple),
    startup_taints=st.lists(taints, max_size=3).map(tuple),
    node_class_ref=st.tuples(names, names, names),
    expire_after=seconds,
    termination_grace_period=seconds,
)


@given(templates)
def test_the_hash_is_a_stable_decimal_64_bit_digest(fields: TemplateFields) -> None:
    digest = template_hash(fields)
    assert digest == template_hash(attrs.evolve(fields))
    assert digest.isdigit()
    assert 0 <= int(digest) < 2**64


@given(templates, st.randoms(use_true_random=False))
def test_taint_order_does_not_change_the_hash(fields: TemplateFields, rnd: object) -> None:
    shuffled = list(fields.taints)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert template_hash(attrs.evolve(fields, taints=tuple(shuffled))) == template_hash(fields)


@given(templates, names, names)
def test_a_new_label_changes_the_hash(fields: TemplateFields, key: str, value: str) -> None:
    labels = {**fields.labels, key: value}
    changed = attrs.evolve(fields, labels=labels)
    assert (template_hash(changed) == template_hash(fields)) == (labels == dict(fields.labels))


BASE = TemplateFields(
    labels={"team": "a"},
    annotations={"note": "x"},
    taints=(TaintFields(key="dedicated", value="a", effect="NoSchedule"),),
    startup_taints=(TaintFields(key="warming", effect="NoExecute"),),
    node_class_ref=("karpenter.kwok.sh", "KWOKNodeClass", "default"),
    expire_after=720 * 3600.0,
    termination_grace_period=3600.0,
)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"labels": {"team": "b"}}, id="labels"),
        pytest.param({"annotations": {"note": "y"}}, id="annotations"),
        pytest.param({"taints": ()}, id="taints"),
        pytest.param({"startup_taints": (TaintFields(key="other"),)}, id="startup-taints"),
        pytest.param(
            {"node_class_ref": ("karpenter.kwok.sh", "KWOKNodeClass", "other")}, id="nodeclassref"
        ),
        pytest.param({"expire_after": None}, id="expire-after"),
        pytest.param({"termination_grace_period": 60.0}, id="termination-grace-period"),
    ],
)
def test_every_hashed_field_changes_the_hash(change: dict[str, object]) -> None:
    assert template_hash(attrs.evolve(BASE, **change)) != template_hash(BASE)  # type: ignore[arg-type]


def test_empty_values_hash_as_absent() -> None:
    bare = TemplateFields(node_class_ref=("g", "k", "n"))
    assert template_hash(attrs.evolve(bare, labels={}, taints=())) == template_hash(bare)


def _annotations(hash_: str, version: str = HASH_VERSION) -> dict[str, str]:
    return {wk.ANNOTATION_NODEPOOL_HASH: hash_, wk.ANNOTATION_NODEPOOL_HASH_VERSION: version}


@pytest.mark.parametrize(
    ("pool", "claim", "drifted"),
    [
        pytest.param(_annotations("1"), _annotations("1"), False, id="same"),
        pytest.param(_annotations("1"), _annotations("2"), True, id="differs"),
        pytest.param(_annotations("1"), _annotations("2", "v2"), False, id="other-version"),
        pytest.param(_annotations("1"), {}, False, id="claim-unstamped"),
        pytest.param({}, _annotations("2"), False, id="pool-unstamped"),
    ],
)
def test_static_drift_compares_hashes_of_one_version(
    pool: dict[str, str], claim: dict[str, str], drifted: bool
) -> None:
    expected = DriftReason.NODEPOOL_DRIFTED if drifted else None
    assert static_drift(pool, claim) == expected


def test_requirements_drift_when_a_label_no_longer_satisfies_the_pool() -> None:
    pool = Requirements([Requirement.new("zone", "In", ["a", "b"])])
    assert requirements_drift(pool, {"zone": "a"}) is None
    assert requirements_drift(pool, {"zone": "c"}) == DriftReason.REQUIREMENTS_DRIFTED
    assert requirements_drift(pool, {}) == DriftReason.REQUIREMENTS_DRIFTED
    absent_ok = Requirements([Requirement.new("gpu", "DoesNotExist")])
    assert requirements_drift(absent_ok, {}) is None
    assert requirements_drift(absent_ok, {"gpu": "1"}) == DriftReason.REQUIREMENTS_DRIFTED


def test_a_hash_version_change_restamps_only_undrifted_nodeclaims_with_the_new_hash() -> None:
    old = _annotations("7", "v2")
    assert rehash_annotations(old, nodepool_hash="9", drifted=False) == _annotations("9")
    assert rehash_annotations(old, nodepool_hash="9", drifted=True) == {
        wk.ANNOTATION_NODEPOOL_HASH_VERSION: HASH_VERSION
    }
    assert rehash_annotations(_annotations("7"), nodepool_hash="9", drifted=False) is None


def test_nodeclaims_karpenter_stamped_are_re_stamped_not_drifted() -> None:
    """A pool karpy takes over from Karpenter: NodePool and NodeClaims carry Karpenter's `v3`
    and a digest karpy cannot reproduce. The versions differ from karpy's, so nothing drifts and
    the NodeClaim is re-stamped with the pool's current karpy hash."""
    karpenters = {
        wk.ANNOTATION_NODEPOOL_HASH: "6175498733396436498",
        wk.ANNOTATION_NODEPOOL_HASH_VERSION: "v3",
    }
    karpys = {wk.ANNOTATION_NODEPOOL_HASH: "42", wk.ANNOTATION_NODEPOOL_HASH_VERSION: HASH_VERSION}
    assert HASH_VERSION != "v3"
    assert static_drift(karpys, karpenters) is None
    assert rehash_annotations(karpenters, nodepool_hash="42", drifted=False) == karpys
