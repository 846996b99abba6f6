"""Kubernetes Pod -> core pod view: every scheduling input survives, bad input names its field."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.apis.codec import from_dict, to_dict
from karpy.apis.kube.pod import Pod as KubePod
from karpy.apis.kube.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from karpy.apis.meta import Quantity
from karpy.core import pods as cp
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import Resources
from karpy.core.taints import Effect, Toleration, TolerationOperator
from karpy.state.podview import ObjectError, VolumeIndex
from karpy.state.snapshot import translate_pod
from tests.unit.apis.strategies import models
from tests.unit.state.support import pod


def _view(p: KubePod, **kw: Any) -> cp.Pod:
    out = translate_pod(p, **kw)
    assert isinstance(out, cp.Pod), out
    return out


def test_requests_keep_containers_sidecars_init_and_overhead() -> None:
    spec = {
        "containers": [
            {"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "limits-only", "resources": {"limits": {"cpu": "250m"}}},
        ],
        "initContainers": [
            {
                "name": "mesh",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m"}},
            },
            {"name": "migrate", "resources": {"requests": {"cpu": "2"}}},
        ],
        "overhead": {"cpu": "50m"},
    }
    view = _view(pod("p", spec))
    assert view.init_containers[0].restart_always
    assert not view.init_containers[1].restart_always
    assert view.containers[1].requests == Resources.of({"cpu": "250m"})
    # max(500m + 250m + 100m sidecar, 2 + 100m sidecar started before it) + 50m overhead.
    assert view.requests() == Resources.of({"cpu": "2150m", "memory": "1Gi", "pods": 1})


def test_node_constraints_tolerations_ports_priority_and_owner() -> None:
    spec = {
        "nodeSelector": {"intent": "apps"},
        "priority": 1000,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                        {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["3"]}]},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {"matchExpressions": [{"key": "kind", "operator": "Exists"}]},
                    }
                ],
            }
        },
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, {}],
        "containers": [
            {
                "name": "web",
                "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9}],
            }
        ],
    }
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u"}
    view = _view(pod("p", spec, ownerReferences=[{**owner, "controller": True}]))
    assert dict(view.node_selector) == {"intent": "apps"}
    assert view.required_node_affinity == (
        Requirements([Requirement.new("zone", "In", ["a"])]),
        Requirements([Requirement.new("cpu", "Gt", ["3"])]),
    )
    assert view.preferred_node_affinity == (
        cp.PreferredSchedulingTerm(10, Requirements([Requirement.new("kind", "Exists")])),
    )
    assert view.tolerations == (
        Toleration("gpu", TolerationOperator.EXISTS, "", Effect.NO_SCHEDULE),
        Toleration(),
    )
    assert view.host_ports == (cp.HostPort(8080),)
    assert view.priority == 1000
    assert view.owner == "apps/ReplicaSet/default/web-1"
    assert _view(pod("q", spec, ownerReferences=[owner])).owner is None


def test_topology_spread_keeps_every_field_and_kubernetes_defaults() -> None:
    selector = {"matchLabels": {"app": "web"}}
    spec = {
        "containers": [],
        "topologySpreadConstraints": [
            {
                "maxSkew": 2,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": selector,
                "minDomains": 3,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
                "matchLabelKeys": ["pod-template-hash"],
            },
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
            },
        ],
    }
    full, bare = _view(pod("p", spec)).topology_spread
    assert full == cp.TopologySpreadConstraint(
        topology_key="topology.kubernetes.io/zone",
        max_skew=2,
        selector=cp.LabelSelector.of({"app": "web"}),
        when_unsatisfiable=cp.WhenUnsatisfiable.SCHEDULE_ANYWAY,
        min_domains=3,
        node_affinity_policy=cp.InclusionPolicy.IGNORE,
        node_taints_policy=cp.InclusionPolicy.HONOR,
        match_label_keys=("pod-template-hash",),
    )
    assert bare.selector is cp.NOTHING  # a missing selector matches no pod
    assert bare.node_affinity_policy is cp.InclusionPolicy.HONOR
    assert bare.node_taints_policy is cp.InclusionPolicy.IGNORE


def test_pod_affinity_terms_keep_namespaces_and_merge_match_label_keys() -> None:
    term = {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]},
        "namespaces": ["data"],
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "matchLabelKeys": ["tier"],
        "mismatchLabelKeys": ["track"],
    }
    spec = {
        "containers": [],
        "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {}}}
                ]
            },
        },
    }
    view = _view(pod("p", spec, labels={"tier": "web", "track": "canary"}))
    (aff,) = view.pod_affinity
    assert aff.namespaces == frozenset({"data"})
    assert aff.namespace_selector == cp.LabelSelector.of({"team": "a"})
    assert aff.selector.matches({"app": "db", "tier": "web", "track": "stable"})
    assert not aff.selector.matches({"app": "db", "tier": "api", "track": "stable"})
    assert not aff.selector.matches({"app": "db", "tier": "web", "track": "canary"})
    (anti,) = view.preferred_pod_anti_affinity
    assert anti.weight == 5
    assert anti.term.selector.matches({"anything": "x"})  # an empty selector matches every pod
    assert anti.term.namespace_selector is None


def _storage() -> VolumeIndex:
    zonal = from_dict(
        PersistentVolume,
        {
            "metadata": {"name": "pv-1"},
            "spec": {
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "topology.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": ["z1"],
                                    },
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["h"],
                                    },
                                ]
                            }
                        ]
                    }
                }
            },
        },
    )
    wffc = from_dict(
        StorageClass,
        {
            "metadata": {"name": "late"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [
                {
                    "matchLabelExpressions": [
                        {"key": "topology.kubernetes.io/zone", "values": ["z1"]}
                    ]
                },
                {
                    "matchLabelExpressions": [
                        {"key": "topology.kubernetes.io/zone", "values": ["z2"]}
                    ]
                },
            ],
        },
    )
    bound = from_dict(
        PersistentVolumeClaim,
        {"metadata": {"name": "bound", "namespace": "default"}, "spec": {"volumeName": "pv-1"}},
    )
    unbound = from_dict(
        PersistentVolumeClaim,
        {
            "metadata": {"name": "unbound", "namespace": "default"},
            "spec": {"storageClassName": "late"},
        },
    )
    eager = from_dict(StorageClass, {"metadata": {"name": "eager"}, "provisioner": "x"})
    waiting = from_dict(
        PersistentVolumeClaim,
        {
            "metadata": {"name": "waiting", "namespace": "default"},
            "spec": {"storageClassName": "eager"},
        },
    )
    leaving = from_dict(
        PersistentVolumeClaim,
        {
            "metadata": {
                "name": "leaving",
                "namespace": "default",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"volumeName": "pv-1"},
        },
    )
    return VolumeIndex(
        claims={
            ("default", "bound"): bound,
            ("default", "unbound"): unbound,
            ("default", "waiting"): waiting,
            ("default", "leaving"): leaving,
        },
        volumes={"pv-1": zonal},
        classes={"late": wffc, "eager": eager},
    )


def _with_claims(*claims: str) -> dict[str, Any]:
    return {
        "containers": [],
        "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims],
    }


def test_volume_topology_from_bound_pvs_and_wait_for_first_consumer_classes() -> None:
    zone = "topology.kubernetes.io/zone"
    bound = _view(pod("p", _with_claims("bound")), volumes=_storage())
    # The hostname term of a local PV is dropped: no new node could satisfy it.
    assert bound.volume_requirements == (Requirements([Requirement.new(zone, "In", ["z1"])]),)
    late = _view(pod("q", _with_claims("unbound")), volumes=_storage())
    assert late.volume_requirements == (
        Requirements([Requirement.new(zone, "In", ["z1"])]),
        Requirements([Requirement.new(zone, "In", ["z2"])]),
    )
    both = _view(pod("r", _with_claims("bound", "unbound")), volumes=_storage())
    assert [r.get(zone) for r in both.volume_requirements] == [
        Requirement.new(zone, "In", ["z1"]),
        Requirement(zone, False, frozenset()),  # z1 AND z2: no zone satisfies both
    ]


def test_an_ephemeral_volume_before_its_claim_exists_follows_the_template_class() -> None:
    spec = {
        "containers": [],
        "volumes": [
            {
                "name": "scratch",
                "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "late"}}},
            }
        ],
    }
    view = _view(pod("p", spec), volumes=_storage())
    assert len(view.volume_requirements) == 2


@pytest.mark.parametrize(
    ("claims", "problem"),
    [
        (
            ("bound", "gone"),
            "spec.volumes[1].persistentVolumeClaim.claimName:"
            " PersistentVolumeClaim default/gone not found",
        ),
        (("leaving",), "PersistentVolumeClaim default/leaving is being deleted"),
        (("waiting",), "claim is unbound and StorageClass eager binds Immediately"),
    ],
)
def test_unsettled_storage_is_a_per_pod_error_naming_the_volume(
    claims: tuple[str, ...], problem: str
) -> None:
    out = translate_pod(pod("p", _with_claims(*claims)), volumes=_storage())
    assert isinstance(out, ObjectError)
    assert out.message.startswith("Pod default/p: spec.volumes[")
    assert problem in out.message


def test_sidecar_host_ports_count_and_bad_ports_name_their_field() -> None:
    sidecar = {
        "name": "proxy",
        "restartPolicy": "Always",
        "ports": [{"containerPort": 1, "hostPort": 15001, "protocol": "UDP"}],
    }
    plain = {"name": "setup", "ports": [{"containerPort": 1, "hostPort": 9}]}
    view = _view(pod("p", {"containers": [], "initContainers": [plain, sidecar]}))
    assert view.host_ports == (cp.HostPort(15001, "UDP"),)
    bad = {"containers": [{"name": "a", "ports": [{"containerPort": 1, "hostPort": 70000}]}]}
    out = translate_pod(pod("q", bad))
    assert isinstance(out, ObjectError)
    assert "spec.containers[0].ports[0].hostPort: 70000 is not in 1-65535" in out.message


def test_owner_key_names_the_core_group() -> None:
    owner = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "name": "rc",
        "uid": "u",
        "controller": True,
    }
    assert _view(pod("p", ownerReferences=[owner])).owner == "core/ReplicationController/default/rc"


def test_a_bad_quantity_is_a_per_pod_error_naming_the_field() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"memory": "lots"}}}]}
    out = translate_pod(pod("p", spec))
    assert isinstance(out, ObjectError)
    assert (out.kind, out.namespace, out.name, out.uid) == ("Pod", "default", "p", "uid-p")
    assert out.message.startswith("Pod default/p: spec.containers[0].resources.requests[memory]:")
    assert "'lots'" in out.message
    limits = {"containers": [{"name": "a", "resources": {"limits": {"cpu": "fast"}}}]}
    out = translate_pod(pod("q", limits))
    assert isinstance(out, ObjectError)
    assert out.message.startswith("Pod default/q: spec.containers[0].resources.limits[cpu]:")


def test_bad_requirements_and_spreads_name_their_field() -> None:
    gt = {"key": "cpu", "operator": "Gt", "values": ["many"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [gt]}]
            }
        }
    }
    out = translate_pod(pod("p", {"containers": [], "affinity": affinity}))
    assert isinstance(out, ObjectError)
    assert (
        "spec.affinity.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]"
        in out.message
    )
    spread = {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    out = translate_pod(pod("q", {"containers": [], "topologySpreadConstraints": [spread]}))
    assert isinstance(out, ObjectError)
    assert "spec.topologySpreadConstraints[0].maxSkew" in out.message


@given(
    decoded=models(KubePod),
    uid=st.text(alphabet="abc123", min_size=1, max_size=6),
    bad=st.one_of(st.none(), st.text(max_size=6)),
)
def test_any_decodable_pod_translates_or_names_what_is_wrong(
    decoded: KubePod, uid: str, bad: str | None
) -> None:
    p = attrs.evolve(decoded, metadata=attrs.evolve(decoded.metadata, uid=uid))
    if bad is not None and p.spec.containers:
        first = p.spec.containers[0]
        broken = attrs.evolve(
            first, resources=attrs.evolve(first.resources, requests={"cpu": Quantity(bad)})
        )
        p = attrs.evolve(p, spec=attrs.evolve(p.spec, containers=(broken, *p.spec.containers[1:])))
    p = from_dict(KubePod, to_dict(p))  # what the codec decodes, exactly
    out = translate_pod(p)
    if isinstance(out, ObjectError):
        ns, name = p.metadata.namespace or "default", p.metadata.name or ""
        assert out.message.startswith(f"Pod {ns}/{name}: spec.")
        assert out.uid == uid
    else:
        assert out.uid == uid
        assert len(out.containers) == len(p.spec.containers)
        assert out.requests().get_amount("pods") == 1000
