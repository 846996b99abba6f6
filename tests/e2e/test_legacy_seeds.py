"""The seeds' Karpenter v0.x manifests, applied with kubectl exactly as the articles print them
(tests/data/seeds), to the real local control plane with karpy running (kwok provider).

Seed 001: its Provisioner (inline AWS provider and a `spec.cluster` from Karpenter v0.3) and its
nginx Deployment at 10 replicas; karpy keeps an owned NodePool for the Provisioner, launches
m5.large/m5.xlarge nodes labelled karpenter.sh/provisioner-name=default, and mirrors the pool's
readiness onto the Provisioner, with the fields kwok cannot carry named in its status.
Seed 002: its Provisioner is refused, naming the fields (metadata.name is not indented, and the
requirement key " karpenter.sh/capacity-type" is not a qualified name). Seed 003: its manifests
lost their indentation when published, and kubectl refuses them naming the line.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from karpy.apis.v1 import labels as wk
from karpy.convert.cli import main as convert_main
from karpy.localcluster import ClusterInfo
from tests.e2e.daemon import running, running_daemon
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("karpy_crds")

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"


async def kubectl(cluster_info: ClusterInfo, *args: str) -> tuple[int, str]:
    """kubectl against the session's cluster; (exit code, stdout and stderr)."""
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(cluster_info.kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ},
    )
    async with asyncio.timeout(60):
        out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def kubectl_free_convert(path: Path) -> dict[str, Any]:
    """The NodePool `karpy convert --provider kwok` writes for `path` (in this process)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert convert_main(["--provider", "kwok", str(path)]) == 0
    return next(d for d in yaml.safe_load_all(out.getvalue()) if d["kind"] == "NodePool")


def _subset(part: Any, whole: Any) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            k in whole and _subset(v, whole[k]) for k, v in part.items()
        )
    return bool(part == whole)


async def _get(custom: client.CustomObjectsApi, version: str, plural: str, name: str) -> Any:
    group = wk.GROUP
    return await custom.get_cluster_custom_object(group, version, plural, name)


async def test_seed_001_provisioner_and_nginx_run_on_karpy(
    cluster_info: ClusterInfo, api_client: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    code, out = await kubectl(cluster_info, "apply", "-f", str(SEEDS / "001-provisioner.yaml"))
    assert code == 0, out
    assert "provisioner.karpenter.sh/default created" in out
    async with running_daemon(cluster_info):

        async def nodepool() -> Any:
            try:
                return await _get(custom, "v1", "nodepools", "default")
            except client.ApiException:
                return None

        pool = await eventually(nodepool, within=60)
        owner = pool["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "Provisioner",
            "default",
            True,
        )
        assert pool["spec"]["template"]["spec"]["requirements"][0] == {
            "key": wk.LABEL_INSTANCE_TYPE,
            "operator": "In",
            "values": ["m5.large", "m5.xlarge"],
        }
        assert pool["spec"]["limits"] == {"cpu": "1000", "memory": "1000Gi"}
        # `karpy convert` writes the NodePool the controller keeps: the served pool holds every
        # field of the converted one, unchanged (the apiserver adds only its defaults).
        converted = await kubectl_free_convert(SEEDS / "001-provisioner.yaml")
        assert _subset(converted["spec"], pool["spec"]), (converted["spec"], pool["spec"])

        async def provisioner_translated() -> Any:
            found = await _get(custom, "v1alpha5", "provisioners", "default")
            conditions = {c["type"]: c for c in found.get("status", {}).get("conditions", [])}
            return conditions if "Translated" in conditions else None

        conditions = await eventually(provisioner_translated, within=60)
        assert conditions["Translated"]["status"] == "True"
        assert "spec.cluster" in conditions["Translated"]["message"]
        assert "spec.provider" in conditions["Translated"]["message"]
        # Ready mirrors the NodePool's Ready condition (Unknown until the pool reports one). The
        # pool turns Ready on its own schedule and the controller follows it, so both are read
        # in one probe until the pool is Ready and the Provisioner says the same.

        def ready_of(obj: Any) -> dict[str, Any]:
            found = obj.get("status", {}).get("conditions", [])
            return next((c for c in found if c["type"] == "Ready"), {})

        async def ready_mirrored() -> dict[str, Any]:
            pool_ready = ready_of(await _get(custom, "v1", "nodepools", "default"))
            mirror = ready_of(await _get(custom, "v1alpha5", "provisioners", "default"))
            fields = ("status", "reason", "message")
            if pool_ready.get("status") != "True" or any(
                mirror.get(k) != pool_ready.get(k) for k in fields
            ):
                return {}
            return mirror

        await eventually(
            ready_mirrored, within=60, what="the Provisioner's Ready mirrors the Ready NodePool's"
        )

        code, out = await kubectl(
            cluster_info, "apply", "-n", namespace, "-f", str(SEEDS / "001-nginx.yaml")
        )
        assert code == 0, out
        pods = await eventually(running(api_client, namespace, "nginx", 10), within=240)
        for node_name in {p.spec.node_name for p in pods}:
            node = await core.read_node(node_name)
            labels = node.metadata.labels
            assert labels[wk.LABEL_PROVISIONER_NAME] == "default"
            assert labels[wk.LABEL_NODEPOOL] == "default"
            assert labels[wk.LABEL_INSTANCE_TYPE] in {"m5.large", "m5.xlarge"}
            assert labels[wk.LABEL_CAPACITY_TYPE] == "on-demand"  # v0.x's default

        # Deleting the Provisioner takes its NodePool with it (garbage collection by owner).
        code, out = await kubectl(cluster_info, "delete", "-n", namespace, "deployment", "nginx")
        assert code == 0, out
        code, out = await kubectl(cluster_info, "delete", "provisioner", "default", "--wait=false")
        assert code == 0, out


async def test_seed_002_provisioner_is_refused_naming_the_fields(
    cluster_info: ClusterInfo, tmp_path: Path
) -> None:
    code, out = await kubectl(cluster_info, "apply", "-f", str(SEEDS / "002-provisioner.yaml"))
    assert code != 0
    assert "resource name may not be empty" in out, out  # metadata.name is not indented
    # With metadata.name indented as intended, the apiserver still refuses the key, by name.
    text = (SEEDS / "002-provisioner.yaml").read_text().replace("\nname:", "\n  name:")
    fixed = tmp_path / "002-provisioner-name-indented.yaml"
    fixed.write_text(text)
    code, out = await kubectl(cluster_info, "apply", "-f", str(fixed))
    assert code != 0
    assert "spec.requirements[3].key" in out, out
    assert '" karpenter.sh/capacity-type"' in out, out


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        # Flattened, `name:` is no longer under metadata.
        ("003-awsnodetemplate.yaml", "resource name may not be empty"),
        # Flattened, the requirements list ends the mapping: not YAML any more.
        ("003-provisioner.yaml", "line"),
    ],
)
async def test_seed_003_unindented_manifests_are_refused(
    cluster_info: ClusterInfo, manifest: str, why: str
) -> None:
    code, out = await kubectl(cluster_info, "apply", "-f", str(SEEDS / manifest))
    assert code != 0
    assert why in out, out


async def test_v1alpha5_admission_refuses_by_field(
    cluster_info: ClusterInfo, tmp_path: Path
) -> None:
    """What Karpenter's v1alpha5 webhook refused, the served CRDs refuse; Machines are
    read-only."""
    machine = tmp_path / "machine.yaml"
    machine.write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata: {name: m}\nspec: {}\n"
    )
    code, out = await kubectl(cluster_info, "apply", "-f", str(machine))
    assert code != 0
    assert "Machine is read-only in karpy" in out, out
    both = tmp_path / "both.yaml"
    both.write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: both}\n"
        "spec: {ttlSecondsAfterEmpty: 30, consolidation: {enabled: true}}\n"
    )
    code, out = await kubectl(cluster_info, "apply", "-f", str(both))
    assert code != 0
    assert "ttlSecondsAfterEmpty, consolidation.enabled" in out, out
