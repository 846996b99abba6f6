"""Hostile input: Hypothesis-made NodePools and NodeClaims (v1 and v1beta1), v1alpha5
Provisioners and EC2NodeClasses sent to the real apiserver while karpy runs (kwok provider).

karpy runs with its conversion webhook (registered in the worker's CRDs for the test, and
restored to the generated placeholder after), so v1beta1 objects are converted by karpy itself;
the webhook's own refusals (a v1beta1 `kubelet`) count as refusals that must name the field.
An EC2NodeClass is only checked at admission: the kwok provider does not act on it.

Every object is either refused by the apiserver with a message that names the field at fault
(the CRDs' schemas and rules are karpy's admission), or admitted and handled: karpy writes its
status (a NodePool's and a Provisioner's Ready condition, a hand-made NodeClaim's Launched
condition, or the NodeClaim is gone), it never stops (a daemon failure fails the test from
`running_daemon`), and it does not retry an object faster than its backoff: the log lines
that name one object stay few over the run. A pod selecting each admitted NodePool is either
placed or told why by karpy (a FailedScheduling event). The examples are drawn once, with a
fixed seed (`derandomize`), so a failure names an example that comes back on the next run.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from karpy.apis.v1 import labels as wk
from karpy.localcluster import ClusterInfo
from karpy_kwok.apis import labels as kwoklabels
from tests.e2e.daemon import PAUSE_IMAGE, running_daemon
from tests.support.conversion import restore_conversion
from tests.support.hostile import (
    ec2nodeclasses,
    nodeclaims,
    nodepools,
    provisioners,
    v1beta1_nodeclaims,
    v1beta1_nodepools,
)
from tests.support.kubehttp import KubeHTTP
from tests.support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("karpy_crds")]

EXAMPLES = 80
MAX_LINES_PER_OBJECT = 40
"""Log lines (info and above) that may name one object over the run (about a minute): an
object's life (launched, registered, initialized, deleted) takes a handful, a failing one
retried on the reconcilers' backoff (1 s doubling) a few more; one retried in a loop would log
thousands."""
KINDS = {
    "NodePool": (wk.GROUP, "v1", "nodepools"),
    "NodeClaim": (wk.GROUP, "v1", "nodeclaims"),
    "Provisioner": (wk.GROUP, "v1alpha5", "provisioners"),
    "NodePool/v1beta1": (wk.GROUP, "v1beta1", "nodepools"),
    "NodeClaim/v1beta1": (wk.GROUP, "v1beta1", "nodeclaims"),
    "EC2NodeClass": ("karpenter.k8s.aws", "v1", "ec2nodeclasses"),
}
ADMISSION_ONLY = frozenset({"EC2NodeClass"})
"""Kinds the kwok provider does not act on: checked at admission only."""
WEBHOOK_FLAGS = ("--enable-webhook", "--webhook-url", "https://127.0.0.1", "--webhook-port", "0")
_FIELD = re.compile(r"\b(spec|metadata)(\.[A-Za-z\[\]0-9]+)+")


def draw(kwok_class: str) -> list[tuple[str, dict[str, Any]]]:
    """`EXAMPLES` (kind, spec) pairs, the same ones every run."""
    found: list[tuple[str, dict[str, Any]]] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(
        st.one_of(
            nodepools(kwok_class).map(lambda spec: ("NodePool", spec)),
            nodeclaims(kwok_class).map(lambda spec: ("NodeClaim", spec)),
            provisioners().map(lambda spec: ("Provisioner", spec)),
            v1beta1_nodepools(kwok_class).map(lambda spec: ("NodePool/v1beta1", spec)),
            v1beta1_nodeclaims(kwok_class).map(lambda spec: ("NodeClaim/v1beta1", spec)),
            ec2nodeclasses().map(lambda spec: ("EC2NodeClass", spec)),
        )
    )
    def collect(example: tuple[str, dict[str, Any]]) -> None:
        found.append(example)

    collect()
    return found


def names_a_field(error: ApiException) -> bool:
    """Whether the apiserver's refusal says which field is at fault."""
    try:
        status = json.loads(error.body or "{}")
    except ValueError:
        return False
    causes = (status.get("details") or {}).get("causes") or []
    if any(c.get("field") for c in causes):
        return True
    return bool(_FIELD.search(str(status.get("message", ""))))


def _first_field(error: ApiException) -> str:
    """The first field the refusal names, its list indices dropped (for the run's summary)."""
    try:
        status = json.loads(error.body or "{}")
    except ValueError:
        return "?"
    causes = (status.get("details") or {}).get("causes") or []
    field = next((c["field"] for c in causes if c.get("field")), "")
    if not field:
        found = _FIELD.search(str(status.get("message", "")))
        field = found.group(0) if found else "?"
    return re.sub(r"\[\d+\]", "[]", field)


async def handled(custom: client.CustomObjectsApi, kind: str, name: str) -> bool:
    """karpy has answered the object: a Ready (or, for a NodeClaim, Launched) condition of
    any status, or the NodeClaim is gone (read as v1, which karpy reads)."""
    group, _, plural = KINDS[kind]
    version = "v1alpha5" if kind == "Provisioner" else "v1"
    try:
        found = await custom.get_cluster_custom_object(group, version, plural, name)
    except ApiException as error:
        if error.status == 404 and kind.startswith("NodeClaim"):
            return True
        raise
    wanted = "Launched" if kind.startswith("NodeClaim") else "Ready"
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c.get("type") == wanted for c in conditions)


def refused_by_field(error: ApiException) -> bool:
    """Refused at admission (400/422), or by karpy's conversion webhook (the apiserver reports
    a failed conversion as a 500 quoting the webhook), naming the field either way."""
    if error.status in (400, 422):
        return names_a_field(error)
    return (
        error.status == 500
        and "conversion webhook" in (error.body or "")
        and (names_a_field(error))
    )


async def webhook_registered(custom: client.CustomObjectsApi, tag: str, kwok_class: str) -> None:
    """Wait until the apiserver calls karpy's webhook (it picks up a CRD's new clientConfig a
    moment after karpy writes it): a plain v1beta1 NodePool goes through, then is deleted."""
    name = f"h{tag}-probe"
    body = {
        "apiVersion": f"{wk.GROUP}/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {"name": kwok_class}}}},
    }

    async def created() -> bool:
        try:
            await custom.create_cluster_custom_object(wk.GROUP, "v1beta1", "nodepools", body)
        except ApiException as error:
            if error.status == 500 and "conversion webhook" in (error.body or ""):
                return False
            raise
        return True

    await eventually(created, within=60, interval=0.2, what="karpy's webhook registered")
    await custom.delete_cluster_custom_object(wk.GROUP, "v1", "nodepools", name)


async def test_hostile_objects_are_refused_by_field_or_handled(
    cluster_info: ClusterInfo,
    api_client: client.ApiClient,
    kube_http: KubeHTTP,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    tag = secrets.token_hex(3)
    kwok_class = f"hostile-{tag}"
    await custom.create_cluster_custom_object(
        kwoklabels.KWOK_GROUP,
        "v1alpha1",
        "kwoknodeclasses",
        {
            "apiVersion": f"{kwoklabels.KWOK_GROUP}/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": kwok_class},
        },
    )
    try:
        async with running_daemon(cluster_info, flags=WEBHOOK_FLAGS):
            await webhook_registered(custom, tag, kwok_class)
            await _run(custom, core, namespace, tag, kwok_class, caplog)
    finally:
        restore_conversion(kube_http)


async def _run(
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    namespace: str,
    tag: str,
    kwok_class: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    examples = draw(kwok_class)
    refused: list[tuple[str, str]] = []
    admitted: list[tuple[str, str]] = []
    blind: list[str] = []
    reasons: Counter[str] = Counter()
    for number, (kind, spec) in enumerate(examples):
        name = f"h{tag}-{number:03d}-{kind.lower().replace('/', '-')}"
        group, version, plural = KINDS[kind]
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": kind.split("/")[0],
            "metadata": {"name": name},
            "spec": spec,
        }
        try:
            await custom.create_cluster_custom_object(group, version, plural, body)
        except ApiException as error:
            refused.append((kind, name))
            reasons[_first_field(error)] += 1
            if not refused_by_field(error):
                blind.append(f"{kind} {spec}: {error.status} {error.body!r}")
        else:
            admitted.append((kind, name))
    assert blind == []
    pools = [name for kind, name in admitted if kind.startswith("NodePool")]
    for pool in pools:
        pod: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pool},
            "spec": {
                "nodeSelector": {wk.LABEL_NODEPOOL: pool},
                "containers": [
                    {
                        "name": "pause",
                        "image": PAUSE_IMAGE,
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    }
                ],
            },
        }
        await core.create_namespaced_pod(namespace, pod)

    async def unhandled() -> list[str]:
        return [
            f"{k} {n}"
            for k, n in admitted
            if k not in ADMISSION_ONLY and not await handled(custom, k, n)
        ]

    async def all_handled() -> bool:
        return not await unhandled()

    try:
        await eventually(all_handled, within=120, what="karpy to answer every object")
    except AssertionError as error:
        raise AssertionError(f"not handled: {await unhandled()}") from error

    async def unexplained() -> list[str]:
        left = []
        for pool in pools:
            pod = await core.read_namespaced_pod(pool, namespace)
            if pod.spec.node_name:
                continue
            events = await core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={pool}"
            )
            if not any(
                e.reason == "FailedScheduling" and e.source and e.source.component == "karpy"
                for e in events.items
            ):
                left.append(pool)
        return left

    async def all_explained() -> bool:
        return not await unexplained()

    try:
        await eventually(all_explained, within=120, what="every pod placed or told why")
    except AssertionError as error:
        raise AssertionError(f"neither placed nor told why: {await unexplained()}") from error

    # Clean up while karpy runs: it terminates what it launched.
    for kind, name in admitted:
        group, version, plural = KINDS[kind]
        try:
            await custom.delete_cluster_custom_object(group, version, plural, name)
        except ApiException as error:
            if error.status != 404:  # a NodeClaim karpy deleted itself
                raise

    async def ours_gone() -> bool:
        listed = await custom.list_cluster_custom_object(wk.GROUP, "v1", "nodeclaims")
        return not [
            c
            for c in listed["items"]
            if tag in c["metadata"]["name"]
            or tag in (c["metadata"].get("labels") or {}).get(wk.LABEL_NODEPOOL, "")
        ]

    await eventually(ours_gone, within=120, what="every NodeClaim of the run gone")
    await custom.delete_cluster_custom_object(
        kwoklabels.KWOK_GROUP, "v1alpha1", "kwoknodeclasses", kwok_class
    )

    lines: Counter[str] = Counter()
    for record in caplog.records:
        said = str(record.__dict__)
        for _, name in admitted:
            if name in said:
                lines[name] += 1
    logging.getLogger(__name__).info(
        "hostile input: %d examples (%s), %d refused, %d admitted (%s); most lines for one "
        "object: %s; refused for: %s",
        len(examples),
        dict(Counter(kind for kind, _ in examples)),
        len(refused),
        len(admitted),
        dict(Counter(kind for kind, _ in admitted)),
        lines.most_common(3),
        reasons.most_common(),
    )
    assert refused, admitted
    assert admitted, refused
    noisy = {name: count for name, count in lines.items() if count > MAX_LINES_PER_OBJECT}
    assert noisy == {}
