"""The one place that pins what the local control plane runs.

Changing a version here changes the cache key, so the next ``karpy cluster up`` builds the new
binaries and leaves the old ones untouched.
"""

from __future__ import annotations

from typing import Final

#: The Kubernetes release built for the local control plane (kube-apiserver,
#: kube-controller-manager, kube-scheduler). Its staging modules (k8s.io/api, ...) are pinned to
#: the matching ``v0.<minor>.<patch>``.
KUBERNETES_VERSION: Final = "1.33.13"

#: kwok, which plays the kubelet for the simulated nodes karpy's kwok provider creates.
KWOK_VERSION: Final = "0.7.0"

#: Helm, which the chart's tests lint, render and install with (helm.sh/helm/v3/cmd/helm).
HELM_VERSION: Final = "3.22.0"

#: Jaeger all-in-one (github.com/jaegertracing/jaeger/cmd/jaeger, the OpenTelemetry-Collector-based
#: Jaeger 2 binary; the Go module keeps v1 tags), which the tracing test sends karpy's spans to.
JAEGER_VERSION: Final = "1.76.0"

#: Cluster API's core controller manager (sigs.k8s.io/cluster-api/core), which the Cluster API
#: provider's tests and demo run on the local control plane: MachineDeployment -> MachineSet ->
#: Machine is its logic, not a stand-in's. Its go.mod asks for Go 1.26.
CLUSTER_API_VERSION: Final = "1.14.2"

#: The oldest Go toolchain that builds the pinned Kubernetes release.
MINIMUM_GO: Final = (1, 24)

#: Kubernetes' staging modules. ``k8s.io/kubernetes`` requires each at ``v0.0.0`` with a local
#: ``replace``; a module that depends on it has to pin them to real versions itself. A replace
#: line for a module outside the build graph is harmless.
STAGING_MODULES: Final = (
    "api",
    "apiextensions-apiserver",
    "apimachinery",
    "apiserver",
    "cli-runtime",
    "client-go",
    "cloud-provider",
    "cluster-bootstrap",
    "code-generator",
    "component-base",
    "component-helpers",
    "controller-manager",
    "cri-api",
    "cri-client",
    "csi-translation-lib",
    "dynamic-resource-allocation",
    "endpointslice",
    "externaljwt",
    "kms",
    "kube-aggregator",
    "kube-controller-manager",
    "kube-proxy",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "metrics",
    "mount-utils",
    "pod-security-admission",
)


def staging_version(kubernetes_version: str = KUBERNETES_VERSION) -> str:
    """The staging-module version that matches a Kubernetes release: 1.33.13 -> v0.33.13."""
    major, minor, patch = kubernetes_version.split(".")
    if major != "1":
        raise ValueError(f"unsupported Kubernetes major version in {kubernetes_version!r}")
    return f"v0.{minor}.{patch}"
