"""The Helm chart renders what a Karpenter user expects to install, and its values.schema.json
refuses, naming the key, any value karpy would not act on.

These run the real helm (built from Go modules, cached) over deploy/charts/karpy; applying the
chart to a cluster and running karpy as its ServiceAccount is tests/e2e/test_chart.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from karpy.runtime.options import FeatureGates, documented, load
from karpy_aws.operator import AWSProviderOptions
from karpy_kwok import options_from_settings
from tests.support.helm import CHART, REQUIRED, helm, only, render, set_flags, template
from tests.support.marks import TOOLS

pytestmark = list(TOOLS)

NOT_VALUES = {"KUBECONFIG", "BIND_ADDRESS", "DISABLE_LEADER_ELECTION", "WEBHOOK_URL"}
"""In a pod karpy uses its ServiceAccount, binds every interface, always elects a leader and is
reached through its Service."""


def _env(documents: list[dict[str, Any]]) -> dict[str, str]:
    container = only(documents, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env: dict[str, str] = {}
    for item in container["env"]:
        env[item["name"]] = item.get("value", f"<{item.get('valueFrom')}>")
    return env


def test_helm_lint_passes_strictly() -> None:
    result = helm("lint", "--strict", str(CHART), *set_flags(REQUIRED))
    assert result.code == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"replicas": -1}, "replicas"),
        ({"settings.featureGates.fancyScheduling": True}, "fancyScheduling"),
        ({"settings.featureGates.staticCapacity": "yes"}, "staticCapacity"),
        ({"replica": 2}, "replica"),
        ({"settings.clusterNmae": "demo"}, "clusterNmae"),
        ({"settings.batchIdleDuration": "soon"}, "batchIdleDuration"),
        ({"logLevel": "verbose"}, "logLevel"),
        ({"settings.provider": "gcp"}, "provider"),
        ({"settings.provider": "kwok", "settings.interruptionQueue": "q"}, "interruptionQueue"),
        ({"settings.provider": "kwok", "settings.reservedENIs": 1}, "reservedENIs"),
        ({"settings.vmMemoryOverheadPercent": 7.5}, "vmMemoryOverheadPercent"),
        ({"settings.aws.region": "Oregon"}, "region"),
    ],
)
def test_the_schema_refuses_a_bad_value_naming_its_key(values: dict[str, object], key: str) -> None:
    result = template({**REQUIRED, **values})
    assert result.code != 0
    assert "schema" in result.stderr
    assert key in result.stderr, result.stderr


def test_only_a_cluster_name_is_required_the_region_comes_from_the_instance() -> None:
    missing_name = template({"settings.aws.region": "us-west-2"})
    assert missing_name.code != 0
    assert "clusterName" in missing_name.stderr
    env = _env(render({"settings.clusterName": "demo"}))
    assert "AWS_REGION" not in env
    aws = AWSProviderOptions.from_settings(load([], env).provider.settings)
    assert aws.region is None  # the provider asks instance metadata
    assert _env(render({**REQUIRED, "settings.aws.region": "eu-west-1"}))["AWS_REGION"] == (
        "eu-west-1"
    )


def test_rbac_is_least_privilege() -> None:
    documents = render()
    roles = [d for d in documents if d["kind"] in ("ClusterRole", "Role")]
    for role in roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["kind"], rule)
    namespaced = only(documents, "Role")
    assert namespaced["metadata"]["namespace"] == "karpy"
    # The Lease, Karpenter v0.x's settings ConfigMap (by name, read only), and the Secret the
    # conversion webhook's replicas share their certificate in.
    resources = [r["resources"] for r in namespaced["rules"]]
    assert resources == [["leases"], ["configmaps"], ["secrets"]]
    assert namespaced["rules"][1]["resourceNames"] == ["karpenter-global-settings"]
    assert namespaced["rules"][1]["verbs"] == ["get"]
    assert namespaced["rules"][2]["verbs"] == ["get", "create"]
    without_webhook = only(render({**REQUIRED, "controller.webhook.enabled": False}), "Role")
    assert [r["resources"] for r in without_webhook["rules"]] == [["leases"], ["configmaps"]]
    cluster_rules = only(documents, "ClusterRole")["rules"]
    assert not any("leases" in r["resources"] for r in cluster_rules)
    # A provider's node class is granted only with that provider.
    groups = {g for r in cluster_rules for g in r["apiGroups"]}
    assert "karpenter.k8s.aws" in groups
    assert "karpenter.kwok.sh" not in groups
    kwok = only(render({**REQUIRED, "settings.provider": "kwok"}), "ClusterRole")["rules"]
    kwok_groups = {g for r in kwok for g in r["apiGroups"]}
    assert "karpenter.kwok.sh" in kwok_groups
    assert "karpenter.k8s.aws" not in kwok_groups
    # The AWS provider reads one Service, the cluster DNS, and nothing else of Services.
    services = [r for r in cluster_rules if "services" in r["resources"]]
    assert services == [
        {
            "apiGroups": [""],
            "resources": ["services"],
            "resourceNames": ["kube-dns"],
            "verbs": ["get"],
        }
    ]
    assert not any("services" in r["resources"] for r in kwok)


def test_the_capacity_buffer_gate_grants_what_buffers_read_and_write() -> None:
    def buffer_rules(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rules = only(documents, "ClusterRole")["rules"]
        return [
            r
            for r in rules
            if "autoscaling.x-k8s.io" in r["apiGroups"] or "podtemplates" in r["resources"]
        ]

    assert buffer_rules(render()) == []  # off by default, as Karpenter's gate
    documents = render({**REQUIRED, "settings.featureGates.capacityBuffer": True})
    granted = {
        (g, res, v)
        for r in buffer_rules(documents)
        for g in r["apiGroups"]
        for res in r["resources"]
        for v in r["verbs"]
    }
    assert ("autoscaling.x-k8s.io", "capacitybuffers/status", "patch") in granted
    assert ("", "podtemplates", "watch") in granted
    assert load([], _env(documents)).feature_gates.capacity_buffer is True


def test_the_deployment_runs_as_karpenter_does() -> None:
    documents = render()
    deployment = only(documents, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["image"] == "karpy:0.1.0"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"} in expressions
    assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone"
    ]
    assert only(documents, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    service = only(documents, "Service")
    assert service["spec"]["ports"][0]["port"] == 8080
    assert not [d for d in documents if d["kind"] == "ServiceMonitor"]
    env = _env(documents)
    assert env["LEADER_ELECTION_NAMESPACE"].startswith("<")  # from the pod's own namespace
    # Karpenter v0.x's karpenter-global-settings is read from the release's namespace, where
    # the Role grants reading it.
    assert "metadata.namespace" in env["SYSTEM_NAMESPACE"]
    # Spans name the pod they come from (OpenTelemetry's Kubernetes resource attributes); the
    # kubelet expands $(VAR) from the variables defined before it.
    container_env = [
        e["name"]
        for e in only(documents, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    ]
    attributes = dict(pair.split("=", 1) for pair in env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    assert attributes["k8s.namespace.name"] == "$(LEADER_ELECTION_NAMESPACE)"
    assert attributes["k8s.pod.name"] == "$(LEADER_ELECTION_IDENTITY)"
    for source in ("LEADER_ELECTION_NAMESPACE", "LEADER_ELECTION_IDENTITY"):
        assert container_env.index(source) < container_env.index("OTEL_RESOURCE_ATTRIBUTES")


def test_optional_pieces_appear_when_asked_for() -> None:
    documents = render(
        {
            **REQUIRED,
            "managedNodeGroup": "system",
            "serviceMonitor.enabled": True,
            "serviceMonitor.additionalLabels.release": "prom",
            "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn": "arn:aws:iam::1:role/k",
            "image.digest": "sha256:" + "a" * 64,
        }
    )
    pod = only(documents, "Deployment")["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert {
        "key": "eks.amazonaws.com/nodegroup",
        "operator": "In",
        "values": ["system"],
    } in expressions
    assert pod["containers"][0]["image"] == "karpy@sha256:" + "a" * 64
    monitor = only(documents, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [{"path": "/metrics", "port": "http-metrics"}]
    account = only(documents, "ServiceAccount")
    assert account["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/k"
    }


@pytest.mark.parametrize("provider", ["aws", "kwok"])
def test_every_daemon_setting_is_a_value_and_karpy_accepts_what_the_chart_sets(
    provider: str,
) -> None:
    values: dict[str, object] = {
        **REQUIRED,
        "settings.provider": provider,
        "tracing.otlpEndpoint": "http://collector:4318",
        "settings.nodeRepair.toleration": "5m",
        "settings.extendedResourceInitializationTimeout": "10m",
    }
    if provider == "aws":
        values |= {
            "settings.aws.region": "us-west-2",
            "settings.aws.defaultInstanceProfile": "KarpenterNodeInstanceProfile",
            "settings.interruptionQueue": "karpy-demo",
            "settings.clusterEndpoint": "https://example.eks.amazonaws.com",
            "settings.clusterCABundle": "Q0E=",
            "settings.aws.instanceTypes": "m5.large,c5.large",
            "settings.vmMemoryOverheadPercent": 0.1,
            "settings.reservedENIs": 1,
            "settings.isolatedVPC": True,
            "settings.eksControlPlane": True,
        }
    env = _env(render(values))
    if provider == "aws":  # Karpenter's names, as a Karpenter user's tooling expects
        assert {
            "AWS_REGION",
            "CLUSTER_ENDPOINT",
            "CLUSTER_CA_BUNDLE",
            "INTERRUPTION_QUEUE",
            "VM_MEMORY_OVERHEAD_PERCENT",
            "RESERVED_ENIS",
            "ISOLATED_VPC",
            "EKS_CONTROL_PLANE",
        } <= set(env)
    daemon = {variable for _, variable, _ in documented()}
    # The v0.x default instance profile is an AWS setting, rendered with the aws provider only.
    expected = (
        daemon - NOT_VALUES - ({"AWS_DEFAULT_INSTANCE_PROFILE"} if provider != "aws" else set())
    )
    assert expected <= set(env), sorted(expected - set(env))
    pod_fields = {name: "from-the-pod" for name, value in env.items() if value.startswith("<")}
    options = load([], {**env, **pod_fields})
    assert options.provider.name == provider
    assert options.provider.cluster_name == "demo"
    assert options.telemetry.otlp_endpoint == "http://collector:4318"
    assert options.feature_gates == FeatureGates()  # Karpenter's defaults
    assert options.node_repair.toleration == 300.0
    assert options.initialization.extended_resource_timeout == 600.0
    if provider == "aws":
        aws = AWSProviderOptions.from_settings(options.provider.settings)
        assert aws.region == "us-west-2"
        assert aws.interruption_queue == "karpy-demo"
        assert aws.instance_types == ("c5.large", "m5.large")
        assert (aws.cluster_endpoint, aws.cluster_ca_bundle) == (
            "https://example.eks.amazonaws.com",
            "Q0E=",
        )
        assert (aws.vm_memory_overhead_percent, aws.reserved_enis) == (0.1, 1)
        assert (aws.isolated_vpc, aws.use_pricing_api, aws.eks_control_plane) == (
            True,
            False,
            True,
        )
    else:
        options_from_settings(dict(options.provider.settings))
        assert set(options.provider.settings) == {"registration-delay"}


def test_the_node_overlay_gate_reaches_karpy() -> None:
    env = _env(render({**REQUIRED, "settings.featureGates.nodeOverlay": True}))
    assert "NodeOverlay=true" in env["FEATURE_GATES"].split(",")
    assert load([], {"FEATURE_GATES": env["FEATURE_GATES"]}).feature_gates.node_overlay
