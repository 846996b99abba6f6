"""What karpy asked of the apiserver: the local cluster's audit log, read by user agent.

kube-apiserver audits every request at Metadata level, at the ResponseComplete stage, one JSON
object a line, except the components' leader-election and health traffic. That is the
apiserver's own account, not karpy's: karpy's client names itself ``karpy/<version>`` in its
User-Agent, so tests can prove that only informers list and the scale-out benchmark can count
karpy's requests by verb — watches, lists, gets and writes as the apiserver saw them — whatever
identity karpy runs as (tests run it as the admin).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs

KARPY_USER_AGENT_PREFIX: Final = "karpy/"
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

POLICY: Final = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi*", "/api*"]
  - level: None
    resources: [{group: "coordination.k8s.io", resources: ["leases"]}]
    userGroups: ["system:masters"]
    verbs: ["get", "update"]
  - level: Metadata
"""


@attrs.frozen
class AuditedRequest:
    """One request karpy made, as the apiserver recorded it."""

    verb: str  # the apiserver's verb: get, list, watch, create, update, patch, delete
    resource: str  # plural, with its subresource after a slash: "nodeclaims/status"
    name: str
    namespace: str
    code: int
    user_agent: str
    uri: str
    # When the apiserver received it (UTC). Events are written when the response completes, so a
    # watch appears only once it ends: sort requests into phases by this, not by log position.
    received: datetime = attrs.field(factory=lambda: EPOCH)
    group: str = ""  # the API group, "" for the core group
    user: str = ""  # the authenticated username, e.g. system:serviceaccount:<ns>:<name>


def write_policy(path: Path) -> Path:
    """Write the audit policy file kube-apiserver is started with."""
    path.write_text(POLICY)
    return path


def read(path: Path, *, skip: int = 0) -> Iterator[AuditedRequest]:
    """The requests in audit log `path`, after the first `skip` lines (a mark from `lines`)."""
    if not path.exists():
        return
    with path.open() as log:
        for number, line in enumerate(log):
            if number < skip or not line.strip():
                continue
            event: dict[str, Any] = json.loads(line)
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", "")
            if ref.get("subresource"):
                resource = f"{resource}/{ref['subresource']}"
            yield AuditedRequest(
                verb=event.get("verb", ""),
                resource=resource,
                name=ref.get("name", ""),
                namespace=ref.get("namespace", ""),
                code=int((event.get("responseStatus") or {}).get("code", 0)),
                user_agent=event.get("userAgent", ""),
                uri=event.get("requestURI", ""),
                received=_received(event.get("requestReceivedTimestamp", "")),
                group=ref.get("apiGroup", ""),
                user=(event.get("user") or {}).get("username", ""),
            )


def _received(timestamp: str) -> datetime:
    """An audit timestamp ("2026-01-02T03:04:05.123456Z") as UTC; the epoch if absent."""
    if not timestamp:
        return EPOCH
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def lines(path: Path) -> int:
    """How many lines the log holds now: pass it as `skip` to read only what comes after."""
    if not path.exists():
        return 0
    with path.open() as log:
        return sum(1 for _ in log)


def karpy_requests(path: Path, *, skip: int = 0) -> list[AuditedRequest]:
    """The requests karpy's client made (by its User-Agent), after the first `skip` lines."""
    return [r for r in read(path, skip=skip) if r.user_agent.startswith(KARPY_USER_AGENT_PREFIX)]


def count_by_verb(requests: list[AuditedRequest]) -> Counter[str]:
    """Requests by apiserver verb."""
    return Counter(request.verb for request in requests)
