"""A disruption command as it is recorded on the API server, so a restart loses nothing.

The orchestration queue writes, before it changes anything else:
- on each candidate NodeClaim: `karpy.sh/disruption-command: <id>`,
  `karpy.sh/disruption-replacements: <how many it creates>`, `karpy.sh/disruption-started:
  <RFC 3339 time>`, and the `DisruptionReason` condition (reason Empty, Drifted, ...);
- on each replacement NodeClaim, at creation: `karpy.sh/replacement-for: <id>`;
- on each candidate's Node: the taint `karpenter.sh/disrupted:NoSchedule`.

From those alone a process that starts (or takes over leadership) regroups every command in
flight (`in_flight`): a command whose replacements all exist is waited on and finished; one that
is missing a replacement (a crash between the first write and the last create) is rolled back.
A `disrupted` taint on a Node whose NodeClaim carries no command and is not being deleted is
stale, and is removed. A replacement whose command has no candidate left is done, and loses its
annotation. Pure functions of the objects read.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

import attrs

from karpy.apis.kube.node import Node
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.taints import DISRUPTED_TAINT


def command_of(claim: NodeClaim) -> str | None:
    """The id of the command `claim` is a candidate of, if any."""
    return claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_COMMAND) or None


def replacement_for(claim: NodeClaim) -> str | None:
    """The id of the command `claim` was created to replace nodes for, if any."""
    return claim.metadata.annotations.get(wk.ANNOTATION_REPLACEMENT_FOR) or None


def tainted(node: Node) -> bool:
    """Whether the Node carries karpenter.sh/disrupted:NoSchedule."""
    return any(
        t.key == DISRUPTED_TAINT.key and t.effect == DISRUPTED_TAINT.effect
        for t in node.spec.taints
    )


def _expected(claim: NodeClaim) -> int | None:
    text = claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_REPLACEMENTS, "")
    return int(text) if text.isdigit() else None


def _started(claim: NodeClaim) -> datetime.datetime | None:
    text = claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_STARTED)
    if not text:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def record(
    command_id: str,
    *,
    replacements: int,
    started: datetime.datetime,
    traceparent: str | None = None,
) -> dict[str, str]:
    """The annotations that mark a candidate of command `command_id` (with the command's span,
    when traced, so the process that finishes it continues the same trace)."""
    return {
        wk.ANNOTATION_DISRUPTION_COMMAND: command_id,
        wk.ANNOTATION_DISRUPTION_REPLACEMENTS: str(replacements),
        wk.ANNOTATION_DISRUPTION_STARTED: started.astimezone(datetime.UTC).isoformat(),
        **({wk.ANNOTATION_DISRUPTION_TRACEPARENT: traceparent} if traceparent else {}),
    }


CANDIDATE_ANNOTATIONS = (
    wk.ANNOTATION_DISRUPTION_COMMAND,
    wk.ANNOTATION_DISRUPTION_REPLACEMENTS,
    wk.ANNOTATION_DISRUPTION_STARTED,
    wk.ANNOTATION_DISRUPTION_TRACEPARENT,
)


@attrs.frozen(kw_only=True)
class InFlight:
    """One command as the API server shows it.

    `candidates` are its NodeClaims not yet being deleted, `removed` those already being deleted
    (the command got as far as deleting them); `replacements` are the live NodeClaims created
    for it. `expected` is how many replacements it meant to create (None if unreadable) and
    `started` when it began (None if unreadable).
    """

    command_id: str
    candidates: tuple[NodeClaim, ...]
    removed: tuple[NodeClaim, ...]
    replacements: tuple[NodeClaim, ...]
    expected: int | None
    started: datetime.datetime | None

    @property
    def traceparent(self) -> str | None:
        """The command's span, as its candidates record it (None when it was not traced)."""
        for claim in (*self.candidates, *self.removed):
            found = claim.metadata.annotations.get(wk.ANNOTATION_DISRUPTION_TRACEPARENT)
            if found:
                return found
        return None

    @property
    def complete(self) -> bool:
        """Every replacement it meant to create exists."""
        return self.expected is not None and len(self.replacements) >= self.expected


def in_flight(claims: Iterable[NodeClaim]) -> dict[str, InFlight]:
    """Every command with a candidate NodeClaim on the API server, by id."""
    candidates: dict[str, list[NodeClaim]] = {}
    removed: dict[str, list[NodeClaim]] = {}
    replacements: dict[str, list[NodeClaim]] = {}
    for claim in claims:
        command = command_of(claim)
        if command is not None:
            deleting = claim.metadata.deletion_timestamp is not None
            (removed if deleting else candidates).setdefault(command, []).append(claim)
        made_for = replacement_for(claim)
        if made_for is not None and claim.metadata.deletion_timestamp is None:
            replacements.setdefault(made_for, []).append(claim)
    found: dict[str, InFlight] = {}
    for command in sorted(candidates.keys() | removed.keys()):
        members = sorted(
            [*candidates.get(command, ()), *removed.get(command, ())],
            key=lambda c: c.metadata.name or "",
        )
        expected = {_expected(c) for c in members}
        started = [s for s in (_started(c) for c in members) if s is not None]
        found[command] = InFlight(
            command_id=command,
            candidates=tuple(sorted(candidates.get(command, ()), key=_name)),
            removed=tuple(sorted(removed.get(command, ()), key=_name)),
            replacements=tuple(sorted(replacements.get(command, ()), key=_name)),
            expected=expected.pop() if len(expected) == 1 else None,
            started=min(started) if started else None,
        )
    return found


def _name(claim: NodeClaim) -> str:
    return claim.metadata.name or ""


def finished_replacements(claims: Iterable[NodeClaim]) -> list[NodeClaim]:
    """Replacements whose command has no candidate left at all (draining ones count): their
    annotation has served its purpose (keeping the new node from being called empty while the
    old one drains)."""
    listed = list(claims)
    live = {command_of(c) for c in listed} - {None}
    return [
        c
        for c in listed
        if (made_for := replacement_for(c)) is not None
        and made_for not in live
        and c.metadata.deletion_timestamp is None
    ]


def stale_taints(nodes: Iterable[Node], claims: Iterable[NodeClaim], busy: set[str]) -> list[Node]:
    """Nodes tainted karpenter.sh/disrupted that nothing is disrupting: not being deleted, with
    a NodeClaim that is neither being deleted, nor a candidate of a recorded command, nor in
    `busy` (NodeClaim names the queue is working on right now)."""
    by_node = {c.status.node_name: c for c in claims if c.status.node_name}
    stale: list[Node] = []
    for node in nodes:
        if node.metadata.deletion_timestamp is not None or not tainted(node):
            continue
        claim = by_node.get(node.metadata.name or "")
        if claim is None:
            continue
        if claim.metadata.deletion_timestamp is not None or command_of(claim) is not None:
            continue
        if (claim.metadata.name or "") in busy:
            continue
        stale.append(node)
    return stale
