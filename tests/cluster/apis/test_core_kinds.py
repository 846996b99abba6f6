"""karpy's models of core kinds against objects the real apiserver returns.

The apiserver is the authority on wire names: every field karpy decodes from a Pod, PDB,
PVC, PV, StorageClass, DaemonSet or Lease must come back out of the codec exactly as the
server wrote it, and the scheduling-relevant fields must land where the simulation reads them.
"""

from __future__ import annotations

import secrets
from typing import Any

from kubernetes_asyncio import client

from karpy.apis.codec import from_dict, to_dict
from karpy.apis.kube.coordination import Lease
from karpy.apis.kube.pod import Pod
from karpy.apis.kube.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from karpy.apis.kube.workloads import DaemonSet, PodDisruptionBudget
from tests.cluster.apis.support import is_subset

SELECTOR = {"matchLabels": {"app": "web"}}
ZONE = "topology.kubernetes.io/zone"
CONTAINER = {
    "name": "app",
    "image": "registry.k8s.io/pause:3.10",
    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
    "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}],
}
POD_SPEC: dict[str, Any] = {
    "containers": [CONTAINER],
    "initContainers": [
        {"name": "sidecar", "image": "registry.k8s.io/pause:3.10", "restartPolicy": "Always"}
    ],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}
    ],
    "priorityClassName": "system-cluster-critical",
    "schedulerName": "default-scheduler",
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["spot"],
                            }
                        ]
                    },
                }
            ],
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": SELECTOR,
                    "namespaceSelector": {},
                    "matchLabelKeys": ["pod-template-hash"],
                }
            ]
        },
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "topologyKey": "topology.kubernetes.io/zone",
                        "labelSelector": {
                            "matchExpressions": [{"key": "tier", "operator": "Exists"}]
                        },
                        "namespaces": ["default"],
                    },
                }
            ]
        },
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": SELECTOR,
            "minDomains": 3,
            "nodeAffinityPolicy": "Honor",
            "nodeTaintsPolicy": "Ignore",
            "matchLabelKeys": ["pod-template-hash"],
        }
    ],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
}


def _untyped(body: dict[str, Any]) -> Any:
    """The client's stubs want V1* models; the API takes plain manifests just as well."""
    return body


def _raw(api: client.ApiClient, obj: object) -> dict[str, Any]:
    """The object as the server wrote it (the client re-renders times with +00:00)."""
    raw: dict[str, Any] = _utc_as_z(api.sanitize_for_serialization(obj))
    return raw


def _utc_as_z(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _utc_as_z(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utc_as_z(v) for v in value]
    if isinstance(value, str) and value.endswith("+00:00") and "T" in value:
        return value.removesuffix("+00:00") + "Z"
    return value


async def test_pod_scheduling_fields_decode_and_encode_as_the_server_writes_them(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web", "pod-template-hash": "abc"}},
        "spec": POD_SPEC,
    }
    raw = _raw(api_client, await core.create_namespaced_pod(namespace, _untyped(body)))
    pod = from_dict(Pod, raw)
    assert is_subset(to_dict(pod)["spec"], raw["spec"])
    spec = pod.spec
    assert spec.containers[0].resources.requests == {"cpu": "250m", "memory": "64Mi"}
    assert spec.containers[0].ports[0].host_port == 8080
    assert spec.init_containers[0].restart_policy == "Always"
    assert spec.priority == 2000000000  # resolved from the priority class by admission
    affinity = spec.affinity
    assert affinity is not None
    assert affinity.pod_anti_affinity is not None
    term = affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0]
    assert term.match_label_keys == ("pod-template-hash",)
    assert term.namespace_selector is not None
    spread = spec.topology_spread_constraints[0]
    assert (spread.min_domains, spread.node_taints_policy) == (3, "Ignore")
    assert spec.volumes[0].persistent_volume_claim is not None
    assert spec.volumes[0].persistent_volume_claim.claim_name == "data"


def _storage_objects(suffix: str) -> tuple[Any, Any, Any]:
    storage_class = {
        "metadata": {"name": f"zonal-{suffix}"},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["us-west-2a"]}]}],
    }
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": f"zonal-{suffix}",
            "resources": {"requests": {"storage": "10Gi"}},
        },
    }
    zone_term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}]}
    volume = {
        "metadata": {"name": f"pv-{suffix}"},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0abc"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [zone_term]}},
        },
    }
    return _untyped(storage_class), _untyped(claim), _untyped(volume)


async def test_workload_and_storage_kinds_round_trip_through_the_server(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    storage_class, claim, volume = _storage_objects(secrets.token_hex(3))
    pdb = {"metadata": {"name": "web"}, "spec": {"maxUnavailable": "25%", "selector": SELECTOR}}
    daemonset = {
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [CONTAINER]},
            },
        },
    }
    lease = {
        "metadata": {"name": "karpy-leader"},
        "spec": {
            "holderIdentity": "karpy-0",
            "leaseDurationSeconds": 15,
            "renewTime": "2024-01-02T03:04:05.123456Z",
        },
    }
    policy = client.PolicyV1Api(api_client)
    created: dict[type[Any], object] = {
        PodDisruptionBudget: await policy.create_namespaced_pod_disruption_budget(
            namespace, _untyped(pdb)
        ),
        StorageClass: await client.StorageV1Api(api_client).create_storage_class(storage_class),
        PersistentVolumeClaim: await core.create_namespaced_persistent_volume_claim(
            namespace, claim
        ),
        PersistentVolume: await core.create_persistent_volume(volume),
        DaemonSet: await client.AppsV1Api(api_client).create_namespaced_daemon_set(
            namespace, _untyped(daemonset)
        ),
        Lease: await client.CoordinationV1Api(api_client).create_namespaced_lease(
            namespace, _untyped(lease)
        ),
    }
    for cls, obj in created.items():
        raw = _raw(api_client, obj)
        encoded = to_dict(from_dict(cls, raw))
        for part in ("spec", "provisioner", "allowedTopologies", "volumeBindingMode"):
            if part in encoded:
                assert is_subset(encoded[part], raw[part]), (cls.__name__, part)
    decoded_lease = from_dict(Lease, _raw(api_client, created[Lease]))
    assert decoded_lease.spec.renew_time is not None
    assert decoded_lease.spec.renew_time.microsecond == 123456
    decoded_pdb = from_dict(PodDisruptionBudget, _raw(api_client, created[PodDisruptionBudget]))
    assert decoded_pdb.spec.max_unavailable == "25%"
    pv = from_dict(PersistentVolume, _raw(api_client, created[PersistentVolume]))
    assert pv.spec.csi is not None
    assert pv.spec.csi.volume_handle == "vol-0abc"
