"""Which nodes the provisioner expects pending pods to land on, and until when.

Karpenter's cluster state marks a node *nominated* when a provisioning pass places a pending pod
on it, and disruption leaves a nominated node alone: kube-scheduler may take a while to bind the
pods (after an apiserver outage, tens of seconds for a hundred pods), and a node removed as empty
in that gap costs a relaunch. The mark lasts a window (max(2 x batch max duration, 10 s)) and
every pass that places pods there again extends it, so it holds exactly while the pods are
pending and still fit the node, and lapses soon after they bind, go away, or fit elsewhere.

kube-scheduler does not follow the nominations: it binds a pending pod to whichever node it
scores best, often not the one it was nominated to. When it binds pod P (nominated to node N)
to node M, the pod planned for M is now the one that needs N. So a nomination whose own pods
all went elsewhere still holds while any pod the same pass nominated (to any node) is pending:
the pending pods need the capacity the pass counted, whichever node each ends on. Only a later
pass can tell that N is no longer needed.

The window runs only while the provisioner keeps passing. A nomination made by the latest pass
is *held* past its window until a later pass has looked at the pods again: while cluster state is
not synced (after an apiserver outage, a launch still resolving) the provisioner cannot pass, and
a nomination lapsing then would let disruption call the node empty the moment it resumes, before
the provisioner had the chance to renew it. `passes` counts completed passes, so a process that
has not passed yet (just restarted) can tell that it knows no nominations.

The record lives in cluster state, not in the provisioner, so any controller reads it through
`ClusterView.nominated`, and it is rebuilt from the cluster after a restart: the first pass
re-nominates every pending pod that fits an existing or in-flight node. It is keyed by the name
the scheduler knows the node by: the Node's name, or the NodeClaim's while it has none.
Times are UTC epoch seconds, as disruption's.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

PodKey = tuple[str, str]
"""A pod's (namespace, name)."""


@attrs.frozen
class Nomination:
    """Pods expected on one node, and when the expectation lapses unless renewed."""

    pods: frozenset[PodKey]
    expires: float
    held: bool = False
    """Past `expires`, kept because no provisioning pass has run since the one that made it."""
    made_by: int = 0
    """The number of the provisioning pass that made or last renewed it."""


class NodeNominations:
    """Node name -> its current nomination. Written by the provisioner, read through the view.

    Written and read on the event loop only, so it needs no lock.
    """

    def __init__(self) -> None:
        self._by_node: dict[str, Nomination] = {}
        self._passes = 0
        self._pass_pods: dict[int, set[PodKey]] = {}
        self._version = 0

    @property
    def version(self) -> int:
        """Bumped by every pass, nomination and forgetting: equal versions, same nominations
        (though each may still lapse with time: `next_lapse`)."""
        return self._version

    def next_lapse(self, now: float) -> float | None:
        """The earliest time after `now` at which a nomination's window ends, if any."""
        return min((n.expires for n in self._by_node.values() if n.expires > now), default=None)

    @property
    def passes(self) -> int:
        """Provisioning passes completed in this process (`passed`)."""
        return self._passes

    def passed(self) -> None:
        """A provisioning pass has looked at every pending pod and nominated what it placed on
        existing or in-flight nodes: nominations it did not renew may now lapse."""
        self._passes += 1
        self._version += 1
        for number in [n for n in self._pass_pods if n < self._passes - 1]:
            del self._pass_pods[number]

    def pods_of_pass(self, number: int) -> frozenset[PodKey]:
        """Every pod pass `number` nominated, to any node; empty once a later pass completed
        after it (that pass's own nominations are what count then)."""
        return frozenset(self._pass_pods.get(number, ()))

    def nominate(self, node: str, pods: Iterable[PodKey], *, now: float, window: float) -> None:
        """Nominate `node` for `pods` until `now + window`; a live nomination is extended and
        its pods joined with these."""
        if window <= 0:
            msg = f"NodeNominations.nominate: window must be > 0 seconds, got {window}"
            raise ValueError(msg)
        pods = frozenset(pods)
        self._version += 1
        self._pass_pods.setdefault(self._passes, set()).update(pods)
        current = self._by_node.get(node)
        keep = current is not None and current.expires > now
        pods = pods | (current.pods if keep and current is not None else frozenset())
        expires = max(now + window, current.expires if keep and current is not None else 0.0)
        self._by_node[node] = Nomination(pods=pods, expires=expires, made_by=self._passes)

    def get(self, node: str, *, now: float) -> Nomination | None:
        """The nomination of `node` at `now`, if any: live within its window, or held past it
        (`Nomination.held`) while no pass has run since the one that made it; forgets a lapsed
        one."""
        current = self._by_node.get(node)
        if current is None:
            return None
        if current.expires > now:
            return current
        if current.made_by >= self._passes - 1:  # made by the latest pass, or the one running
            return attrs.evolve(current, held=True)
        del self._by_node[node]
        return None

    def forget(self, node: str) -> None:
        """Drop `node`'s nomination (the node is gone)."""
        if self._by_node.pop(node, None) is not None:
            self._version += 1

    def __len__(self) -> int:
        return len(self._by_node)
