"""The cloud provider's well-known labels (``SchedulerOptions.provider_labels``, from
``CloudProvider.well_known_labels``): like karpy's own, a pod or DaemonSet may select one its
NodePool does not mention, as Karpenter's AllowUndefinedWellKnownLabels; any other label the
NodePool does not define keeps it off the NodePool."""

from __future__ import annotations

from karpy.core.instancetypes import InstanceType
from karpy.core.snapshot import DaemonSet
from tests.unit.core import builders as b

FLAVOUR = "example.com/flavour"
PROVIDER_LABELS = frozenset({FLAVOUR})


def _types() -> tuple[InstanceType, ...]:
    return (
        b.instance_type("plain", 2, 4, price=0.1),
        b.instance_type("sweet", 4, 8, price=0.2, labels={FLAVOUR: "sweet"}),
    )


def test_a_pod_may_select_a_provider_label_its_nodepool_does_not_mention() -> None:
    p = b.pod(node_selector={FLAVOUR: "sweet"})
    assert b.run(b.snapshot(types=_types()), [p]).nodeclaims == ()
    allowed = b.run(b.snapshot(types=_types()), [p], provider_labels=PROVIDER_LABELS)
    (claim,) = allowed.nodeclaims
    assert "sweet" in claim.instance_types


def test_a_daemonset_selecting_a_provider_label_counts_on_a_nodepool_that_does_not_mention_it() -> (
    None
):
    agent = b.pod("agent", cpu="1", node_selector={FLAVOUR: "sweet"})
    ds = DaemonSet("kube-system", "agent", agent)
    snap = b.snapshot(types=_types(), daemonsets=[ds])
    (without,) = b.run(snap, [b.pod(cpu="500m")]).nodeclaims
    assert without.requests.get_amount("cpu") == 500
    (counted,) = b.run(snap, [b.pod(cpu="500m")], provider_labels=PROVIDER_LABELS).nodeclaims
    assert counted.requests.get_amount("cpu") == 1500
