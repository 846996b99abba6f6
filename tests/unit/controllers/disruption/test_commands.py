"""A disruption command as recorded on the API server: regrouping after a restart, stale taints,
finished replacements. Pure functions of the objects, so no cluster is needed."""

from __future__ import annotations

import datetime

from karpy.apis.kube.common import Taint, TaintEffect
from karpy.apis.kube.node import Node, NodeSpec
from karpy.apis.meta import ObjectMeta
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from karpy.controllers.disruption import commands

WHEN = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
TAINT = Taint(key=wk.TAINT_DISRUPTED_KEY, effect=TaintEffect.NO_SCHEDULE)


def _claim(
    name: str, *, node: str | None = None, deleting: bool = False, **annotations: str
) -> NodeClaim:
    return NodeClaim(
        metadata=ObjectMeta(
            name=name,
            annotations=annotations,
            deletion_timestamp=WHEN if deleting else None,
        ),
        spec=NodeClaimSpec(
            requirements=(), node_class_ref=NodeClassReference(group="g", kind="K", name="n")
        ),
        status=NodeClaimStatus(node_name=node),
    )


def _candidate(name: str, command: str, replacements: int, **kw: object) -> NodeClaim:
    record = commands.record(command, replacements=replacements, started=WHEN)
    claim = _claim(name, **kw)  # type: ignore[arg-type]
    meta = claim.metadata
    return NodeClaim(
        metadata=ObjectMeta(
            name=meta.name,
            annotations={**meta.annotations, **record},
            deletion_timestamp=meta.deletion_timestamp,
        ),
        spec=claim.spec,
        status=claim.status,
    )


def _replacement(name: str, command: str, *, deleting: bool = False) -> NodeClaim:
    return _claim(name, deleting=deleting, **{wk.ANNOTATION_REPLACEMENT_FOR: command})


def test_in_flight_regroups_commands_from_their_annotations() -> None:
    found = commands.in_flight(
        [
            _candidate("a", "c1", 1),
            _candidate("b", "c1", 1, deleting=True),
            _replacement("r1", "c1"),
            _candidate("x", "c2", 2),
            _replacement("r2", "c2"),
            _replacement("r3", "c2", deleting=True),
            _claim("plain"),
        ]
    )
    assert sorted(found) == ["c1", "c2"]
    c1, c2 = found["c1"], found["c2"]
    assert [c.metadata.name for c in c1.candidates] == ["a"]
    assert [c.metadata.name for c in c1.removed] == ["b"]
    assert [c.metadata.name for c in c1.replacements] == ["r1"]
    assert c1.complete
    assert c1.started == WHEN
    assert c2.expected == 2
    assert not c2.complete  # r3 is going away: a replacement is missing


def test_a_taint_is_stale_only_when_nothing_is_disrupting_its_node() -> None:
    nodes = [
        Node(metadata=ObjectMeta(name=n), spec=NodeSpec(taints=(TAINT,)))
        for n in ("stale", "command", "deleting", "busy", "unmanaged")
    ]
    claims = [
        _claim("s", node="stale"),
        _candidate("c", "c1", 0, node="command"),
        _claim("d", node="deleting", deleting=True),
        _claim("b", node="busy"),
    ]
    stale = commands.stale_taints(nodes, claims, busy={"b"})
    assert [n.metadata.name for n in stale] == ["stale"]


def test_a_replacement_is_finished_once_no_candidate_of_its_command_is_left() -> None:
    claims = [
        _candidate("draining", "c1", 1, deleting=True),
        _replacement("r1", "c1"),
        _replacement("r2", "gone"),
    ]
    assert [c.metadata.name for c in commands.finished_replacements(claims)] == ["r2"]
