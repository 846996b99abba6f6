"""User data per family and launch templates: contents, stable names, find-or-create on moto."""

from __future__ import annotations

import base64
import datetime
import email.message
import email.parser
import pathlib
import tomllib

import pytest
import yaml

from karpy.runtime.clock import FakeClock
from karpy_aws import errors
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.amifamily.userdata import (
    BootstrapOptions,
    KubeletConfig,
    Taint,
    dump_toml,
    render_user_data,
)
from karpy_aws.providers.launchtemplate import (
    LaunchTemplateOptions,
    LaunchTemplates,
    MetadataOptions,
    default_block_devices,
)
from karpy_aws.session import AWSSession

from .conftest import AMI_IDS, CLUSTER, FaultInjector, Moto

pytestmark = pytest.mark.aws

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----").decode()
ENDPOINT = "https://ABC.gr7.us-west-2.eks.amazonaws.com"


def _options(custom: str | None = None) -> BootstrapOptions:
    return BootstrapOptions(
        cluster_name=CLUSTER,
        cluster_endpoint=ENDPOINT,
        ca_bundle=CA,
        cluster_cidr="172.20.0.0/16",
        labels={"karpenter.sh/nodepool": "default", "team": "blue"},
        taints=(Taint(key="dedicated", value="gpu", effect="NoSchedule"),),
        kubelet=KubeletConfig(
            max_pods=29,
            cluster_dns=("172.20.0.10",),
            system_reserved={"cpu": "100m"},
            eviction_hard={"memory.available": "100Mi"},
        ),
        custom_user_data=custom,
    )


def _parts(text: str) -> list[tuple[str, str]]:
    message = email.parser.Parser().parsestr(text)
    parts = []
    for part in message.get_payload():
        assert isinstance(part, email.message.Message)
        payload = part.get_payload()
        assert isinstance(payload, str)
        parts.append((part.get_content_type(), payload))
    return parts


def test_al2023_nodeconfig_carries_cluster_labels_taints_and_kubelet() -> None:
    ((kind, body),) = _parts(render_user_data(AMIFamily.AL2023, _options()))
    assert kind == "application/node.eks.aws"
    spec = yaml.safe_load(body)["spec"]
    assert spec["cluster"] == {
        "name": CLUSTER,
        "apiServerEndpoint": ENDPOINT,
        "certificateAuthority": CA,
        "cidr": "172.20.0.0/16",
    }
    config = spec["kubelet"]["config"]
    assert config["maxPods"] == 29
    assert config["clusterDNS"] == ["172.20.0.10"]
    assert config["systemReserved"] == {"cpu": "100m"}
    assert config["evictionHard"] == {"memory.available": "100Mi"}
    assert {"key": "karpenter.sh/unregistered", "effect": "NoExecute"} in config[
        "registerWithTaints"
    ]
    assert {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"} in config[
        "registerWithTaints"
    ]
    assert spec["kubelet"]["flags"] == ["--node-labels=karpenter.sh/nodepool=default,team=blue"]


def test_al2_bootstrap_script_flags() -> None:
    ((kind, script),) = _parts(render_user_data(AMIFamily.AL2, _options()))
    assert kind == "text/x-shellscript"
    assert script.startswith("#!/bin/bash -xe")
    assert f"/etc/eks/bootstrap.sh {CLUSTER}" in script
    assert f"--apiserver-endpoint {ENDPOINT}" in script
    assert f"--b64-cluster-ca {CA}" in script
    assert "--dns-cluster-ip 172.20.0.10" in script
    assert "--use-max-pods false" in script
    for flag in (
        "--max-pods=29",
        "--node-labels=karpenter.sh/nodepool=default,team=blue",
        "--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered=:NoExecute",
        "--system-reserved=cpu=100m",
        "--eviction-hard=memory.available<100Mi",
    ):
        assert flag in script


def test_bottlerocket_toml_settings() -> None:
    settings = tomllib.loads(render_user_data(AMIFamily.BOTTLEROCKET, _options()))["settings"]
    kube = settings["kubernetes"]
    assert kube["api-server"] == ENDPOINT
    assert kube["cluster-certificate"] == CA
    assert kube["cluster-name"] == CLUSTER
    assert kube["max-pods"] == 29
    assert kube["cluster-dns-ip"] == ["172.20.0.10"]
    assert kube["node-labels"] == {"karpenter.sh/nodepool": "default", "team": "blue"}
    assert kube["node-taints"] == {
        "karpenter.sh/unregistered": [":NoExecute"],
        "dedicated": ["gpu:NoSchedule"],
    }
    assert kube["system-reserved"] == {"cpu": "100m"}


def test_bottlerocket_merges_custom_toml_with_karpy_settings_winning() -> None:
    custom = (
        '[settings.kubernetes]\nmax-pods = 5\n"cluster-name" = "wrong"\n'
        '[settings.kubernetes.node-labels]\nextra = "yes"\n'
        "[settings.host-containers.admin]\nenabled = true\n"
    )
    settings = tomllib.loads(render_user_data(AMIFamily.BOTTLEROCKET, _options(custom)))["settings"]
    assert settings["kubernetes"]["max-pods"] == 29
    assert settings["kubernetes"]["cluster-name"] == CLUSTER
    assert settings["kubernetes"]["node-labels"]["extra"] == "yes"
    assert settings["host-containers"]["admin"]["enabled"] is True


def test_bottlerocket_bad_custom_toml_names_user_data() -> None:
    with pytest.raises(errors.ConfigurationError, match="userData: not valid TOML"):
        render_user_data(AMIFamily.BOTTLEROCKET, _options("[settings"))


@pytest.mark.parametrize(
    ("custom", "expected_kind"),
    [
        pytest.param("#!/bin/bash\necho hi\n", "text/x-shellscript", id="script"),
        pytest.param(
            'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
            '--BOUNDARY\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
            "echo mime\n--BOUNDARY--\n",
            "text/x-shellscript",
            id="mime",
        ),
    ],
)
def test_custom_user_data_runs_before_karpys_part(custom: str, expected_kind: str) -> None:
    parts = _parts(render_user_data(AMIFamily.AL2023, _options(custom)))
    assert [k for k, _ in parts] == [expected_kind, "application/node.eks.aws"]
    assert "echo" in parts[0][1]


def test_custom_family_passes_user_data_through_and_windows_is_refused() -> None:
    assert render_user_data(AMIFamily.CUSTOM, _options("raw")) == "raw"
    with pytest.raises(errors.ConfigurationError, match="Windows2022"):
        render_user_data(AMIFamily.WINDOWS2022, _options())


def test_toml_writer_round_trips_awkward_keys_and_values() -> None:
    doc = {"a": {"b/c": {"x.y": ['q"uote', "new\nline"], "n": 1, "f": 0.5, "t": True}}}
    assert tomllib.loads(dump_toml(doc)) == doc


def test_default_block_devices_per_family() -> None:
    assert [
        (b.device_name, b.volume_size_gib) for b in default_block_devices(AMIFamily.AL2023)
    ] == [("/dev/xvda", 20)]
    assert [
        (b.device_name, b.volume_size_gib) for b in default_block_devices(AMIFamily.BOTTLEROCKET)
    ] == [("/dev/xvda", 4), ("/dev/xvdb", 20)]
    assert default_block_devices(AMIFamily.WINDOWS2019)[0].volume_size_gib == 50
    assert all(b.volume_type == "gp3" and b.encrypted for b in default_block_devices(AMIFamily.AL2))


def _lt_options(moto: Moto, **overrides: object) -> LaunchTemplateOptions:
    values: dict[str, object] = {
        "cluster_name": CLUSTER,
        "nodeclass_name": "default",
        "image_id": AMI_IDS["al2023x86new"],
        "user_data": render_user_data(AMIFamily.AL2023, _options()),
        "instance_profile": "test-cluster_node",
        "security_group_ids": (moto.security_groups["nodes"], moto.security_groups["extra"]),
        "block_devices": default_block_devices(AMIFamily.AL2023),
        "tags": {"team": "blue"},
    }
    values.update(overrides)
    return LaunchTemplateOptions(**values)  # type: ignore[arg-type]


def test_name_is_a_stable_content_hash(moto: Moto) -> None:
    a = _lt_options(moto)
    reordered = _lt_options(
        moto,
        security_group_ids=(moto.security_groups["extra"], moto.security_groups["nodes"]),
    )
    assert a.name == reordered.name
    assert a.name.startswith("karpenter.k8s.aws/")
    assert _lt_options(moto, image_id=AMI_IDS["al2023x86old"]).name != a.name
    assert _lt_options(moto, metadata_options=MetadataOptions(http_tokens="optional")).name != (
        a.name
    )


async def test_find_or_create_writes_the_template_once_and_caches_it(
    session: AWSSession, moto: Moto, faults: FaultInjector
) -> None:
    ec2 = await session.client("ec2")
    clock = FakeClock()
    options = _lt_options(moto, nodeclass_name="find-or-create")
    first = await LaunchTemplates(ec2, clock).ensure(options)
    assert first.name == options.name
    # A second cache (a restarted controller) finds the existing template instead of creating.
    other = LaunchTemplates(ec2, clock)
    assert await other.ensure(options) == first
    assert await other.ensure(options) == first
    assert faults.sent.count("CreateLaunchTemplate") == 1
    assert faults.sent.count("DescribeLaunchTemplates") == 2

    version = await ec2.call(
        "DescribeLaunchTemplateVersions", LaunchTemplateId=first.id, Versions=["$Latest"]
    )
    data = version["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["ImageId"] == AMI_IDS["al2023x86new"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    assert data["IamInstanceProfile"] == {"Name": "test-cluster_node"}
    assert sorted(data["SecurityGroupIds"]) == sorted(options.security_group_ids)
    (bdm,) = data["BlockDeviceMappings"]
    assert (bdm["DeviceName"], bdm["Ebs"]["VolumeSize"], bdm["Ebs"]["VolumeType"]) == (
        "/dev/xvda",
        20,
        "gp3",
    )
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "karpenter.sh/unregistered" in user_data
    described = await ec2.call("DescribeLaunchTemplates", LaunchTemplateIds=[first.id])
    tags = {t["Key"]: t["Value"] for t in described["LaunchTemplates"][0]["Tags"]}
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "find-or-create"
    assert tags["team"] == "blue"


async def test_expired_templates_are_deleted_from_ec2(session: AWSSession, moto: Moto) -> None:
    ec2 = await session.client("ec2")
    clock = FakeClock()
    templates = LaunchTemplates(ec2, clock)
    options = _lt_options(moto, nodeclass_name="expiring")
    await templates.ensure(options)
    assert await templates.delete_expired() == ()
    clock.step(datetime.timedelta(minutes=1))
    assert await templates.delete_expired() == (options.name,)
    with pytest.raises(errors.NotFoundError):
        await ec2.call("DescribeLaunchTemplates", LaunchTemplateNames=[options.name])


def test_al2_script_is_valid_bash(tmp_path: pathlib.Path) -> None:
    import subprocess

    ((_, script),) = _parts(render_user_data(AMIFamily.AL2, _options()))
    path = tmp_path / "user-data.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=10)


async def test_hydrate_adopts_the_clusters_templates_so_they_expire(
    session: AWSSession, moto: Moto
) -> None:
    ec2 = await session.client("ec2")
    clock = FakeClock()
    options = _lt_options(moto, nodeclass_name="left-by-a-previous-leader")
    await LaunchTemplates(ec2, clock).ensure(options)
    restarted = LaunchTemplates(ec2, clock)
    assert await restarted.hydrate(CLUSTER) >= 1
    assert await restarted.hydrate("another-cluster") == 0
    clock.step(datetime.timedelta(minutes=1))
    assert options.name in await restarted.delete_expired()


def _ipv6_options() -> BootstrapOptions:
    base = _options()
    return BootstrapOptions(
        cluster_name=base.cluster_name,
        cluster_endpoint=base.cluster_endpoint,
        ca_bundle=base.ca_bundle,
        cluster_cidr="fd3a:1b2c:3d4e::/108",
        ip_family="ipv6",
        labels=dict(base.labels),
        kubelet=KubeletConfig(max_pods=110, cluster_dns=("fd3a:1b2c:3d4e::a",)),
    )


def test_an_ipv6_cluster_is_bootstrapped_as_ipv6_by_every_family() -> None:
    ((_, script),) = _parts(render_user_data(AMIFamily.AL2, _ipv6_options()))
    assert "--ip-family ipv6 \\\n" in script
    assert "--service-ipv6-cidr fd3a:1b2c:3d4e::/108 \\\n" in script
    assert "--dns-cluster-ip fd3a:1b2c:3d4e::a \\\n" in script
    # IPv4 clusters keep bootstrap.sh's default family: no flag at all.
    ((_, ipv4_script),) = _parts(render_user_data(AMIFamily.AL2, _options()))
    assert "--ip-family" not in ipv4_script
    assert "--service-ipv6-cidr" not in ipv4_script
    ((_, nodeconfig),) = _parts(render_user_data(AMIFamily.AL2023, _ipv6_options()))
    spec = yaml.safe_load(nodeconfig)["spec"]
    assert spec["cluster"]["cidr"] == "fd3a:1b2c:3d4e::/108"
    assert spec["kubelet"]["config"]["clusterDNS"] == ["fd3a:1b2c:3d4e::a"]
    toml = tomllib.loads(render_user_data(AMIFamily.BOTTLEROCKET, _ipv6_options()))
    assert toml["settings"]["kubernetes"]["cluster-dns-ip"] == ["fd3a:1b2c:3d4e::a"]
