"""Said: a lifecycle transition is logged once per NodeClaim, however often its step runs."""

from __future__ import annotations

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec
from karpy.controllers.nodeclaim.lifecycle.fields import Said


def _claim(uid: str) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(name=f"c-{uid}", uid=uid),
        spec=NodeClaimSpec(
            requirements=(),
            node_class_ref=NodeClassReference(group="g", kind="K", name="n"),
        ),
    )


def test_each_message_is_said_once_per_nodeclaim_until_forgotten() -> None:
    said = Said(limit=3)
    one, two = _claim("1"), _claim("2")
    assert said.first("launched", one)
    assert not said.first("launched", one)
    assert said.first("registered", one)
    assert said.first("launched", two)
    said.forget(one)
    assert said.first("launched", one)
    # Past the limit the oldest is forgotten (memory stays bounded).
    assert said.first("initialized", two)
    assert said.first("registered", two)
    assert said.first("launched", two)  # ("launched", two) was the oldest of four
