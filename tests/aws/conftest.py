"""moto's server on 127.0.0.1, seeded once per session, plus a fault injector in front of it.

AWS code is tested against moto's real HTTP server (never real AWS, never a non-loopback
address). moto lacks what the provider must survive in production — capacity errors, throttling,
EKS AMI aliases, pricing — so this file supplies them: AMIs via MOTO_AMIS_PATH, SSM alias
parameters under a test prefix, and a botocore event hook that answers chosen calls with chosen
errors before they reach moto (botocore still parses and retries them as if AWS had answered).
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import secrets
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import botocore.session
import pytest
from aiobotocore.awsrequest import AioAWSResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.apis.kube.common import NodeSelectorOperator, NodeSelectorRequirement
from karpy.apis.meta import Condition, ConditionStatus, ObjectMeta, Quantity
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.common import NodeClaimRequirement, NodeClassReference, RequirementOperator
from karpy.apis.v1.nodeclaim import NodeClaim, NodeClaimSpec, ResourceRequests
from karpy.kube.client import KubeClient
from karpy.localcluster import ClusterInfo as LocalClusterInfo
from karpy.runtime.clock import FakeClock
from karpy_aws.apis import ec2nodeclass as nc
from karpy_aws.apis import ec2nodeclass_status as nc_status
from karpy_aws.apis import labels as awslabels
from karpy_aws.apis.ec2nodeclass import EC2NodeClass
from karpy_aws.cloudprovider.provider import AWSCloudProvider
from karpy_aws.providers.cluster import ClusterInfo
from karpy_aws.providers.instance import Instances
from karpy_aws.providers.instancetype.learned import LearnedMemory
from karpy_aws.providers.instancetype.offerings import InstanceTypeCatalog
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.launchtemplate import LaunchTemplates
from karpy_aws.providers.pricing import PriceCache
from karpy_aws.session import AWSSession, AWSSettings, EventHook
from karpy_aws_emulator.pressure import PATH as PRESSURE_PATH
from karpy_aws_emulator.server import moto_server
from karpy_aws_emulator.world import AMI_IDS, World, seed
from tests.support.kubehttp import KubeHTTP

REGION = "us-west-2"
ACCOUNT = "123456789012"
CLUSTER = "test-cluster"
DISCOVERY = {"karpenter.sh/discovery": CLUSTER}
SSM_PREFIX = "/test/aws/service"
K8S_VERSION = "1.31"
"""Alias parameters are seeded for this version only (the AMIs are named after it too)."""

# ------------------------------------------------------------------ the server

Moto = World
"""The running server and the ids of what was seeded into it (karpy_aws_emulator.world)."""


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """Start moto's ThreadedMotoServer on 127.0.0.1 (never any other address) and seed it."""
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield seed(
            endpoint,
            discovery=DISCOVERY,
            kubernetes_versions=(K8S_VERSION,),
            ssm_prefix=SSM_PREFIX,
        )


# ------------------------------------------------------------------ fault injection


@attrs.define
class Fault:
    """Answer ``operation`` with ``code`` (HTTP ``status``) ``times`` times (None: forever)."""

    operation: str
    code: str
    status: int = 400
    times: int | None = None
    seen: int = 0


@attrs.define
class FaultInjector:
    """Botocore hooks that stand in front of moto.

    * ``fail(op, code)``: the next calls of ``op`` get an EC2-style error response *before they
      are sent*, so botocore parses it and applies its retry policy exactly as with AWS.
    * ``ice(instance_type, zone)``: CreateFleet overrides for that offering are removed from the
      request and reported in the response's ``Errors`` as InsufficientInstanceCapacity, which is
      how AWS reports capacity it does not have. If no override is left, moto is not called.

    Fleet instances get their launch template's security groups from the emulator itself
    (``karpy_aws_emulator.launchtemplates``).
    """

    faults: list[Fault] = attrs.Factory(list)
    answers: dict[str, list[dict[str, Any]]] = attrs.Factory(dict)
    ice_offerings: set[tuple[str, str]] = attrs.Factory(set)
    ice_codes: dict[tuple[str, str], str] = attrs.Factory(dict)
    sent: list[str] = attrs.Factory(list)
    succeeded: list[str] = attrs.Factory(list)
    """Operations moto answered with success (HTTP 2xx), in order."""
    requests: dict[str, list[dict[str, Any]]] = attrs.Factory(dict)
    """Parameters of every call made, by operation, as the caller passed them."""

    def fail(
        self, operation: str, code: str, *, status: int = 400, times: int | None = None
    ) -> None:
        self.faults.append(Fault(operation, code, status, times))

    def answer(self, operation: str, *responses: dict[str, Any]) -> None:
        """Answer ``operation`` (of any service) with ``responses`` in turn (the last one
        repeats) instead of asking moto; for APIs moto does not have (the Pricing API)."""
        self.answers[operation] = list(responses)

    def ice(
        self, instance_type: str, zone: str, *, code: str = "InsufficientInstanceCapacity"
    ) -> None:
        self.ice_offerings.add((instance_type, zone))
        self.ice_codes[(instance_type, zone)] = code

    def hooks(self) -> list[EventHook]:
        return [
            EventHook("before-parameter-build", self._record),
            EventHook("before-send", self._before_send),
            EventHook("before-call", self._answer),
            EventHook("after-call", self._record_success),
            EventHook("before-parameter-build.ec2.CreateFleet", self._strip_ice),
            EventHook("before-call.ec2.CreateFleet", self._short_circuit_ice),
            EventHook("after-call.ec2.CreateFleet", self._report_ice),
        ]

    def _record(
        self, params: dict[str, Any], event_name: str, context: dict[str, Any], **kwargs: Any
    ) -> None:
        # botocore runs the more specific CreateFleet hook (_strip_ice) first; it keeps the
        # request as sent by the caller in the context.
        operation = event_name.rsplit(".", 1)[-1]
        sent = context.get("karpy_request", params)
        self.requests.setdefault(operation, []).append(copy.deepcopy(sent))

    async def _before_send(
        self, request: Any, event_name: str, **kwargs: Any
    ) -> AioAWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        self.sent.append(operation)
        for fault in self.faults:
            if fault.operation == operation and (fault.times is None or fault.seen < fault.times):
                fault.seen += 1
                body = (
                    "<Response><Errors><Error>"
                    f"<Code>{fault.code}</Code><Message>injected {fault.code}</Message>"
                    "</Error></Errors><RequestID>injected</RequestID></Response>"
                ).encode()
                return AioAWSResponse(request.url, fault.status, {}, _Raw(body))
        return None

    def _record_success(self, http_response: Any, event_name: str, **kwargs: Any) -> None:
        if 200 <= http_response.status_code < 300:
            self.succeeded.append(event_name.rsplit(".", 1)[-1])

    def _answer(self, event_name: str, **kwargs: Any) -> tuple[Any, dict[str, Any]] | None:
        operation = event_name.rsplit(".", 1)[-1]
        if operation not in self.answers:
            return None
        self.sent.append(operation)
        queue = self.answers[operation]
        response = queue.pop(0) if len(queue) > 1 else queue[0]
        meta = {"HTTPStatusCode": 200, "RequestId": "answered"}
        return (_StatusOnly(200), {**response, "ResponseMetadata": meta})

    def _strip_ice(self, params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        context["karpy_request"] = copy.deepcopy(params)
        failed: list[dict[str, Any]] = []
        for config in params.get("LaunchTemplateConfigs", []):
            kept = []
            for override in config.get("Overrides", []):
                key = (override.get("InstanceType"), override.get("AvailabilityZone"))
                if key in self.ice_offerings:
                    failed.append(
                        {
                            "LaunchTemplateAndOverrides": {
                                "LaunchTemplateSpecification": config.get(
                                    "LaunchTemplateSpecification", {}
                                ),
                                "Overrides": override,
                            },
                            "Lifecycle": "spot"
                            if params.get("TargetCapacitySpecification", {}).get(
                                "DefaultTargetCapacityType"
                            )
                            == "spot"
                            else "on-demand",
                            "ErrorCode": self.ice_codes.get(key, "InsufficientInstanceCapacity"),
                            "ErrorMessage": "There is no Spot capacity available that matches "
                            "your request.",
                        }
                    )
                else:
                    kept.append(override)
            config["Overrides"] = kept
        context["karpy_ice_errors"] = failed
        context["karpy_ice_all"] = bool(failed) and not any(
            c.get("Overrides") for c in params.get("LaunchTemplateConfigs", [])
        )

    def _short_circuit_ice(
        self, context: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, dict[str, Any]] | None:
        if not context.get("karpy_ice_all"):
            return None
        response = {
            "FleetId": "fleet-injected",
            "Errors": context["karpy_ice_errors"],
            "Instances": [],
            "ResponseMetadata": {"HTTPStatusCode": 200, "RequestId": "injected"},
        }
        return (_StatusOnly(200), response)

    def _report_ice(self, parsed: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        if context.get("karpy_ice_errors") and not context.get("karpy_ice_all"):
            parsed.setdefault("Errors", []).extend(context["karpy_ice_errors"])


@attrs.frozen
class _Raw:
    body: bytes

    async def read(self) -> bytes:
        return self.body


@attrs.frozen
class _StatusOnly:
    status_code: int


# ------------------------------------------------------------------ per-test fixtures


@pytest.fixture
async def kube(cluster_info: LocalClusterInfo, karpy_crds: list[str]) -> AsyncIterator[KubeClient]:
    """An apiserver client on the session's local cluster, karpy's CRDs installed."""
    client = await KubeClient.connect(cluster_info.kubeconfig, request_timeout=10.0)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def cleanup(kube_http: KubeHTTP) -> Iterator[list[str]]:
    """Apiserver paths to remove after the test, finalizers stripped (nothing runs them then)."""
    paths: list[str] = []
    yield paths
    for path in paths:
        kube_http.force_delete(path)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def pressure_plan(moto: Moto, method: str, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read (GET), set (PUT `plan`) or clear (DELETE) the emulator's pressure plan
    (karpy_aws_emulator.pressure): throttling, capacity errors and held-back answers by rule."""
    data = None if plan is None else json.dumps(plan).encode()
    request = urllib.request.Request(moto.endpoint + PRESSURE_PATH, data=data, method=method)  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - moto on loopback
        found: dict[str, Any] = json.loads(answer.read())
        return found


@pytest.fixture
def faults(moto: Moto) -> FaultInjector:
    return FaultInjector()


@pytest.fixture
def settings(moto: Moto) -> AWSSettings:
    return AWSSettings(
        region=REGION,
        endpoint_url=moto.endpoint,
        require_loopback_endpoint=True,
        max_attempts=1,
        call_timeout=30.0,
    )


@pytest.fixture
async def session(
    settings: AWSSettings, spans: InMemorySpanExporter, faults: FaultInjector
) -> AsyncIterator[AWSSession]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    async with AWSSession(
        settings, tracer=provider.get_tracer("tests.aws"), hooks=faults.hooks()
    ) as s:
        yield s
    provider.shutdown()


# ------------------------------------------------------------------ the cloud provider


INSTANCE_TYPES = ["m5.large", "m5.xlarge", "c5.large", "c6g.large", "t3.micro", "m5.metal"]
# Spot prices per type in us-west-2a; 2b is 10% dearer and 2c 10% cheaper (moto quotes one
# constant price for everything, so the kit answers DescribeSpotPriceHistory itself).
SPOT_PRICES = {
    "t3.micro": 0.004,
    "c6g.large": 0.025,
    "c5.large": 0.03,
    "m5.large": 0.035,
    "m5.xlarge": 0.5,
    "m5.metal": 1.5,
}
ZONE_FACTORS = {"us-west-2a": 1.0, "us-west-2b": 1.1, "us-west-2c": 0.9, "us-west-2d": 1.0}
NODE_ROLE = "KarpyNodeRole"


def make_nodeclass(name: str = "default", **spec: Any) -> EC2NodeClass:
    """An EC2NodeClass as a user writes it, with no status: the seeded subnets and security
    groups by discovery tag, the al2023@latest alias and NODE_ROLE, unless ``spec`` says else."""
    fields: dict[str, Any] = {
        "subnet_selector_terms": (nc.SubnetSelectorTerm(tags=DISCOVERY),),
        "security_group_selector_terms": (nc.SecurityGroupSelectorTerm(tags=DISCOVERY),),
        "ami_selector_terms": (nc.AMISelectorTerm(alias="al2023@latest"),),
        "role": NODE_ROLE,
        **spec,
    }
    return EC2NodeClass(metadata=ObjectMeta(name=name), spec=nc.EC2NodeClassSpec(**fields))


def ready_nodeclass(moto: Moto, *, name: str = "default", **spec: Any) -> EC2NodeClass:
    """``make_nodeclass(name, **spec)`` as the status resolver leaves it: every condition True, the
    seeded subnets, the nodes security group and the AL2023 AMIs for both architectures."""
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    conditions = tuple(
        Condition(type=t, status=ConditionStatus.TRUE, last_transition_time=now, reason=t)
        for t in (
            "SubnetsReady",
            "SecurityGroupsReady",
            "AMIsReady",
            "InstanceProfileReady",
            "Ready",
        )
    )
    zones = {"a": "us-west-2a", "a-small": "us-west-2a", "b": "us-west-2b", "c": "us-west-2c"}
    arch = [
        ("amd64", AMI_IDS["al2023x86new"]),
        ("arm64", AMI_IDS["al2023arm"]),
    ]
    return attrs.evolve(
        make_nodeclass(name, **spec),
        status=nc_status.EC2NodeClassStatus(
            subnets=tuple(
                nc_status.Subnet(id=moto.subnets[k], zone=z) for k, z in sorted(zones.items())
            ),
            security_groups=(nc_status.SecurityGroup(id=moto.security_groups["nodes"]),),
            amis=tuple(
                nc_status.AMI(
                    id=ami,
                    requirements=(
                        NodeSelectorRequirement(
                            key=wk.LABEL_ARCH, operator=NodeSelectorOperator.IN, values=(a,)
                        ),
                    ),
                )
                for a, ami in arch
            ),
            instance_profile="karpy-test-profile",
            conditions=conditions,
        ),
    )


@attrs.define
class NodeClasses:
    """karpy_aws.cloudprovider.provider.NodeClassSource over a dict, for tests."""

    items: dict[str, EC2NodeClass] = attrs.Factory(dict)

    async def get(self, name: str) -> EC2NodeClass | None:
        return self.items.get(name)

    def put(self, nodeclass: EC2NodeClass) -> None:
        assert nodeclass.metadata.name is not None
        self.items[nodeclass.metadata.name] = nodeclass


@attrs.frozen
class ProviderKit:
    """An AWSCloudProvider on moto and what tests poke at around it."""

    provider: AWSCloudProvider
    nodeclasses: NodeClasses
    clock: FakeClock
    unavailable: UnavailableOfferings
    cluster: ClusterInfo
    faults: FaultInjector
    moto: Moto

    def ec2(self) -> Any:
        """A plain botocore client on moto, to look behind the provider's back."""
        return boto_client(self.moto, "ec2")


@pytest.fixture
async def kit(session: AWSSession, faults: FaultInjector, moto: Moto) -> ProviderKit:
    """A provider for a cluster of its own (moto is shared by the whole session)."""
    return await build_kit(session, faults, moto)


async def build_kit(
    session: AWSSession,
    faults: FaultInjector,
    moto: Moto,
    *,
    spot_prices: dict[str, float] = SPOT_PRICES,
    learned: LearnedMemory | None = None,
) -> ProviderKit:
    """The ``kit`` fixture's provider, over the instance types ``spot_prices`` lists."""
    clock = FakeClock()
    faults.answer(
        "DescribeSpotPriceHistory",
        {
            "SpotPriceHistory": [
                {
                    "InstanceType": name,
                    "AvailabilityZone": zone,
                    "SpotPrice": f"{price * factor:.6f}",
                    "ProductDescription": "Linux/UNIX",
                    "Timestamp": clock.now(),
                }
                for name, price in spot_prices.items()
                for zone, factor in ZONE_FACTORS.items()
            ]
        },
    )
    ec2 = await session.client("ec2")
    unavailable = UnavailableOfferings(clock)
    prices = PriceCache(ec2=ec2, pricing=None, clock=clock, region=REGION)
    catalog = InstanceTypeCatalog(
        ec2=ec2,
        prices=prices,
        unavailable=unavailable,
        clock=clock,
        names=list(spot_prices),
        learned=learned,
    )
    cluster = ClusterInfo(
        name=f"cluster-{secrets.token_hex(4)}",
        region=REGION,
        endpoint="https://cluster.example.test",
        ca_bundle="Q0E=",
    )
    nodeclasses = NodeClasses()
    nodeclasses.put(ready_nodeclass(moto))
    provider = AWSCloudProvider(
        Instances(ec2, cluster_name=cluster.name),
        catalog,
        cluster=cluster,
        nodeclasses=nodeclasses,
        launch_templates=LaunchTemplates(ec2, clock),
        unavailable=unavailable,
        clock=clock,
    )
    return ProviderKit(provider, nodeclasses, clock, unavailable, cluster, faults, moto)


def make_nodeclaim(
    *requirements: tuple[str, str, tuple[str, ...]],
    name: str = "default-abcde",
    nodepool: str = "default",
    nodeclass: str = "default",
    requests: dict[str, str] | None = None,
) -> NodeClaim:
    """A NodeClaim as the provisioner creates it."""
    return NodeClaim(
        metadata=ObjectMeta(name=name, labels={wk.LABEL_NODEPOOL: nodepool}),
        spec=NodeClaimSpec(
            requirements=tuple(
                NodeClaimRequirement(key=k, operator=RequirementOperator(op), values=v)
                for k, op, v in requirements
            ),
            node_class_ref=NodeClassReference(
                group=awslabels.AWS_GROUP, kind="EC2NodeClass", name=nodeclass
            ),
            resources=ResourceRequests(
                requests={k: Quantity(v) for k, v in (requests or {}).items()}
            ),
        ),
    )


def boto_client(moto: Moto, service: str) -> Any:
    """A plain (synchronous) botocore client on moto, for arranging and inspecting state; one
    per service for the session, since making one takes a good part of a second."""
    return _boto_client(moto.endpoint, service)


@functools.cache
def _boto_client(endpoint: str, service: str) -> Any:
    return botocore.session.get_session().create_client(
        service, region_name=REGION, endpoint_url=endpoint
    )


def node_role(moto: Moto) -> str:
    """A new IAM role in moto, for a NodeClass's ``role``."""
    name = f"node-{secrets.token_hex(4)}"
    boto_client(moto, "iam").create_role(RoleName=name, AssumeRolePolicyDocument="{}")
    return name


def launch_tagged(
    moto: Moto, cluster: str, *, nodepool: str = "default", **extra: str
) -> tuple[str, str]:
    """An instance tagged as karpy tags its launches (plus ``extra``, as the EC2NodeClass's
    tags are); returns (instance id, provider id)."""
    tags = {
        f"kubernetes.io/cluster/{cluster}": "owned",
        "karpenter.sh/nodepool": nodepool,
        **extra,
    }
    reservation = boto_client(moto, "ec2").run_instances(
        ImageId=AMI_IDS["al2023x86new"],
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        SubnetId=moto.subnets["a"],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    instance = reservation["Instances"][0]
    zone = instance["Placement"]["AvailabilityZone"]
    return instance["InstanceId"], f"aws:///{zone}/{instance['InstanceId']}"


def provider_settings(moto: Moto, **extra: str) -> dict[str, str]:
    """The aws provider's settings for moto (one attempt per call, no Pricing API), plus `extra`."""
    return {
        "region": REGION,
        "endpoint-url": moto.endpoint,
        "require-loopback-endpoint": "true",
        "max-attempts": "1",
        "use-pricing-api": "false",
        "instance-types": ",".join(INSTANCE_TYPES),
        **extra,
    }
