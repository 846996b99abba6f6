"""The composition root registers the provisioning pipeline and the provider's hooks.

`karpy run` must build the provider named by `--provider` (through the `karpy.providers` entry
points, wrapped for spans and metrics), inform the NodeClaim and NodePool kinds, and register
the provisioner fed by the pod informer; a provider's background `run()` joins the controllers.
"""

from __future__ import annotations

import pytest

from karpy.cloudprovider.instrumented import InstrumentedCloudProvider
from karpy.cloudprovider.registry import UnknownProviderError
from karpy.controllers.provisioning.provisioner import Provisioner
from karpy.kube.kinds import NODECLAIMS, NODEPOOLS, NODES, PODS
from karpy.localcluster import ClusterInfo
from karpy.operator.wiring import ProviderLoop, build
from karpy.runtime.options import Options, load

pytestmark = pytest.mark.usefixtures("karpy_crds")


def _options(cluster_info: ClusterInfo, *extra: str) -> Options:
    argv = [
        "--kubeconfig",
        str(cluster_info.kubeconfig),
        "--disable-leader-election",
        "--bind-address",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--health-probe-port",
        "0",
        *extra,
    ]
    return load(argv, {})


async def test_build_with_kwok_registers_the_provisioner_and_the_provider_loop(
    cluster_info: ClusterInfo,
) -> None:
    components = await build(_options(cluster_info, "--provider", "kwok", "--cluster-name", "t"))
    try:
        assert {i.kind for i in components.informers} == {
            k.kind for k in (NODES, PODS, NODECLAIMS, NODEPOOLS)
        }
        provider = components.cloudprovider
        assert isinstance(provider, InstrumentedCloudProvider)
        assert provider.name == "kwok"
        provisioners = [c for c in components.controllers if isinstance(c, Provisioner)]
        assert [p.name for p in provisioners] == ["provisioning.provisioner"]
        assert any(isinstance(c, ProviderLoop) for c in components.controllers)
    finally:
        await components.close()


async def test_build_refuses_an_unknown_provider_naming_the_installed_ones(
    cluster_info: ClusterInfo,
) -> None:
    with pytest.raises(UnknownProviderError, match="'nope'") as caught:
        await build(_options(cluster_info, "--provider", "nope"))
    assert "kwok" in caught.value.available


def test_provider_options_default_to_kwok_and_read_their_environment() -> None:
    defaults = load([], {})
    assert (defaults.provider.name, defaults.provider.cluster_name) == ("kwok", "karpy")
    options = load([], {"KARPY_PROVIDER": "aws", "CLUSTER_NAME": "prod"})
    assert (options.provider.name, options.provider.cluster_name) == ("aws", "prod")
    flagged = load(["--provider", "fake"], {"KARPY_PROVIDER": "aws"})
    assert flagged.provider.name == "fake"
