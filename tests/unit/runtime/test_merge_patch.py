"""Merge patches computed from before and after (RFC 7386): the patch applied to `before` gives
`after` back, it names only what changed, and object patches remove emptied labels and
annotations key by key."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.meta import ObjectMeta, with_annotations, with_labels
from karpy.kube.patch import apply_merge_patch, merge_patch, object_patch

KEYS = st.sampled_from(["a", "b", "c", "metadata", "labels"])
SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=3)


def _json(*, null_in_maps: bool) -> st.SearchStrategy[Any]:
    """JSON values; a null inside a map only when `null_in_maps` (RFC 7386 cannot set one)."""
    leaves = SCALARS if null_in_maps else SCALARS.filter(lambda v: v is not None)

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        in_lists = inner | st.none()
        return st.lists(in_lists, max_size=3) | st.dictionaries(KEYS, inner, max_size=4)

    return st.recursive(leaves, extend, max_leaves=12)


BEFORE = _json(null_in_maps=True) | st.none()
AFTER = _json(null_in_maps=False) | st.none()


@given(BEFORE, AFTER)
def test_applying_the_patch_to_before_gives_after(before: Any, after: Any) -> None:
    assert apply_merge_patch(before, merge_patch(before, after)) == after


@given(BEFORE)
def test_a_value_needs_no_change_to_become_itself(value: Any) -> None:
    if isinstance(value, dict):
        assert merge_patch(value, value) == {}
    else:
        assert merge_patch(value, value) == value


def test_the_patch_names_only_what_changed_and_replaces_lists_whole() -> None:
    before = {"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]}, "n": 1}
    after = {"metadata": {"labels": {"a": "1", "c": "3"}, "finalizers": ["x"]}, "n": True}
    assert merge_patch(before, after) == {
        "metadata": {"labels": {"b": None, "c": "3"}, "finalizers": ["x"]},
        "n": True,
    }


NODE = Node(
    metadata=ObjectMeta(
        name="n1",
        resource_version="7",
        labels={"keep": "1", "drop": "2"},
        annotations={"only": "x"},
        finalizers=("f",),
    ),
    spec=NodeSpec(taints=(Taint(key="k", effect=TaintEffect.NO_SCHEDULE),)),
)


def test_an_object_patch_removes_the_last_annotation_by_key_not_the_whole_map() -> None:
    metadata = with_labels(with_annotations(NODE.metadata, {"only": None}), {"drop": None})
    after = Node(metadata=metadata, spec=NODE.spec)
    assert object_patch(NODE, after) == {
        "metadata": {"labels": {"drop": None}, "annotations": {"only": None}}
    }


def test_an_object_patch_sends_an_emptied_list_as_null_and_nothing_for_no_change() -> None:
    after = attrs.evolve(NODE, metadata=attrs.evolve(NODE.metadata, finalizers=()), spec=NodeSpec())
    assert object_patch(NODE, after) == {"metadata": {"finalizers": None}, "spec": {"taints": None}}
    assert object_patch(NODE, NODE) == {}
