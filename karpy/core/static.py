"""Static NodePools (`spec.replicas`, Karpenter's StaticCapacity gate): how many NodeClaims to
launch and which to remove so that a pool holds exactly `replicas`. Pure: the caller reads the
pool's NodeClaims into `StaticClaim`s and acts on the `StaticPlan`.

The counts follow Karpenter's static provisioning and deprovisioning controllers, with two
karpy choices a static pool's user expects:

- Launching counts every NodeClaim of the pool that is not being deleted, disruption
  candidates included (their replacement is on its way, made by the disruption queue). A
  NodeClaim being deleted (expired, interrupted, removed by hand) no longer counts, so its
  replacement launches while it drains. `limits.nodes` caps every NodeClaim of the pool,
  deleting ones included: at the cap a replacement waits for the old node to go.
- Removing counts the NodeClaims neither being deleted nor in a disruption command (a
  command's candidates go anyway, and its replacements stand in for them). Surplus ones are
  removed within the pool's disruption budgets that apply to every reason (a budget that lists
  `reasons` names Karpenter's disruption methods, and scaling down is none of them), and in
  Karpenter's order: NodeClaims not launched yet, then empty nodes, then the others, nodes with
  a `karpenter.sh/do-not-disrupt` pod last; among unlaunched and among busy nodes a higher
  `karpenter.sh/deprovisioning-priority` goes first, then the cheaper to disrupt.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs


@attrs.frozen(kw_only=True)
class StaticClaim:
    """One NodeClaim of a static pool as the planner sees it.

    `launched`: the cloud provider has an instance for it (status.providerID). `empty`: no
    reschedulable pod runs on its node. `protected`: a pod on its node carries an active
    `karpenter.sh/do-not-disrupt`. `cost`: Karpenter's disruption cost of its pods.
    """

    name: str
    deleting: bool = False
    disrupting: bool = False
    launched: bool = True
    empty: bool = True
    protected: bool = False
    cost: float = 0.0
    priority: int = 0


@attrs.frozen(kw_only=True)
class StaticPlan:
    """What to do now: `launch` new NodeClaims, delete the `remove`d ones. `waiting` says why
    the pool is not at `replicas` after this plan (empty when it will be)."""

    launch: int = 0
    remove: tuple[str, ...] = ()
    waiting: str = ""


def _removal_order(claim: StaticClaim) -> tuple[int, int, float, str]:
    if not claim.launched:
        return (0, -claim.priority, 0.0, claim.name)
    if claim.empty and not claim.protected:
        return (1, 0, 0.0, claim.name)
    return (3 if claim.protected else 2, -claim.priority, claim.cost, claim.name)


def plan(
    replicas: int,
    claims: Sequence[StaticClaim],
    *,
    node_limit: int | None = None,
    removable: int | None = None,
) -> StaticPlan:
    """The plan for a pool of `replicas` whose NodeClaims are `claims`.

    `node_limit` is `limits.nodes` (None: no limit); `removable` is how many more NodeClaims
    the pool's budgets let start disrupting now (None: no budget applies). Never launches past
    `replicas` or `node_limit`, never removes more than `removable`, and never removes so many
    that fewer than `replicas` stay."""
    if replicas < 0:
        msg = f"spec.replicas: must not be negative, got {replicas}"
        raise ValueError(msg)
    live = [c for c in claims if not c.deleting]
    standing = [c for c in live if not c.disrupting]
    if len(live) < replicas:
        wanted = replicas - len(live)
        room = wanted if node_limit is None else max(0, node_limit - len(claims))
        launch = min(wanted, room)
        waiting = (
            ""
            if launch == wanted
            else f"limits.nodes is {node_limit} and the pool has {len(claims)} NodeClaim(s)"
        )
        return StaticPlan(launch=launch, waiting=waiting)
    surplus = len(standing) - replicas
    if surplus <= 0:
        return StaticPlan()
    allowed = surplus if removable is None else max(0, min(surplus, removable))
    chosen = sorted(standing, key=_removal_order)[:allowed]
    waiting = (
        ""
        if allowed == surplus
        else f"disruption budgets allow {max(0, removable or 0)} more NodeClaim(s) to go now"
    )
    return StaticPlan(remove=tuple(c.name for c in chosen), waiting=waiting)
