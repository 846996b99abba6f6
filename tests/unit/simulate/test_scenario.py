"""Scenario parsing: the format maps onto core values, and bad input names its field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.apis.v1 import labels as wk
from karpy.core.scheduling import solve
from karpy.core.taints import Effect
from karpy.simulate.cli import explain_main, simulate_main
from karpy.simulate.reader import ScenarioError
from karpy.simulate.render import plan_dict
from karpy.simulate.scenario import load, parse

BASE: dict[str, object] = {
    "nodePools": [{"name": "default"}],
    "instanceTypes": {"provider": "fake", "count": 4},
}


def _with(**extra: object) -> dict[str, object]:
    return {**BASE, **extra}


def test_minimal_scenario() -> None:
    scenario = parse(_with(pods=[{"name": "a", "requests": {"cpu": "1"}}]))
    (pod,) = scenario.pods
    assert pod.key == "default/a"
    assert pod.requests().get_amount("cpu") == 1000
    assert len(scenario.snapshot.instance_types["default"]) == 4


def test_an_installed_providers_catalog_is_named_by_its_entry_point() -> None:
    """`provider: kwok` reads the kwok provider's shipped catalog (group karpy.catalogs)."""
    scenario = parse(
        _with(
            instanceTypes={"provider": "kwok"},
            pods=[{"name": "a", "requests": {"cpu": "3", "memory": "4Gi"}}],
        )
    )
    types = scenario.snapshot.instance_types["default"]
    names = {t.name for t in types}
    assert {"c5.large", "m6g.8xlarge", "t4g.large"} <= names
    results = solve(scenario.snapshot, list(scenario.pods), scenario.options)
    (claim,) = results.nodeclaims
    assert all(name in names for name in claim.instance_types)


@pytest.mark.parametrize(
    ("catalog", "message"),
    [
        pytest.param(
            {"provider": "nimbus"},
            "instanceTypes.provider: unknown provider 'nimbus' (supported: fake, kwok)",
            id="unknown",
        ),
        pytest.param(
            {"provider": "kwok", "count": 3},
            "instanceTypes.count: count is for the 'fake' catalog only",
            id="count-on-kwok",
        ),
    ],
)
def test_a_catalog_provider_is_checked(catalog: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse(_with(instanceTypes=catalog))
    assert message in str(raised.value)


def test_deployments_expand_to_owned_replicas() -> None:
    dep = {"name": "web", "replicas": 3, "template": {"labels": {"app": "web"}}}
    pods = parse(_with(deployments=[dep])).pods
    assert [p.name for p in pods] == ["web-0", "web-1", "web-2"]
    assert {p.owner for p in pods} == {"apps/Deployment/default/web"}


def test_kubernetes_shaped_fields_are_understood() -> None:
    pod = {
        "name": "full",
        "namespace": "team",
        "containers": [
            {
                "name": "a",
                "requests": {"cpu": "1"},
                "ports": [{"containerPort": 80, "hostPort": 80}],
            }
        ],
        "initContainers": [{"name": "s", "restartPolicy": "Always", "requests": {"cpu": "500m"}}],
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": wk.LABEL_ARCH, "operator": "In", "values": ["amd64"]}
                            ]
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                    }
                ],
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "topologyKey": wk.LABEL_HOSTNAME,
                            "labelSelector": {"matchLabels": {"a": "b"}},
                        },
                    }
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 2,
                "topologyKey": wk.LABEL_TOPOLOGY_ZONE,
                "whenUnsatisfiable": "ScheduleAnyway",
                "minDomains": 2,
                "matchLabelKeys": ["rev"],
            }
        ],
    }
    (parsed,) = parse(_with(pods=[pod])).pods
    assert parsed.namespace == "team"
    assert parsed.requests().get_amount("cpu") == 1500
    assert parsed.host_ports[0].port == 80
    assert parsed.tolerations[0].effect is Effect.NO_SCHEDULE
    assert parsed.required_node_affinity[0].single_value(wk.LABEL_ARCH) == "amd64"
    assert parsed.preferred_node_affinity[0].weight == 5
    assert parsed.preferred_pod_anti_affinity[0].term.topology_key == wk.LABEL_HOSTNAME
    assert parsed.topology_spread[0].min_domains == 2
    assert parsed.topology_spread[0].match_label_keys == ("rev",)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param(
            {"instanceTypes": {"provider": "fake"}}, "nodePools: is required", id="missing-pools"
        ),
        pytest.param(_with(podz=[]), "(root): unknown field(s) podz", id="unknown-root-field"),
        pytest.param(
            _with(pods=[{"name": "a", "requests": {"cpu": "lots"}}]),
            "pods[0].requests.cpu: quantity 'lots'",
            id="bad-quantity",
        ),
        pytest.param(
            _with(pods=[{"requests": {}}]), "pods[0].name: is required", id="missing-name"
        ),
        pytest.param(
            _with(pods=[{"name": "a", "tolerations": [{"effect": "Sometimes"}]}]),
            "pods[0].tolerations[0].effect:",
            id="bad-effect",
        ),
        pytest.param(
            _with(
                nodePools=[
                    {"name": "p", "requirements": [{"key": "k", "operator": "In", "values": []}]}
                ]
            ),
            "nodePools[0].requirements[0]: requirement 'k': operator In needs values",
            id="bad-requirement",
        ),
        pytest.param(
            {**BASE, "instanceTypes": {"provider": "cloud9"}},
            "instanceTypes.provider: unknown provider",
            id="bad-provider",
        ),
        pytest.param(
            _with(deployments=[{"name": "d", "replicas": -1, "template": {}}]),
            "deployments[0].replicas: must not be negative",
            id="negative-replicas",
        ),
        pytest.param(
            _with(pods=[{"name": "a"}, {"name": "a"}]),
            "pod names must be unique",
            id="duplicate-pods",
        ),
        pytest.param(
            _with(
                pods=[
                    {"name": "a", "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "k"}]}
                ]
            ),
            "maxSkew: must be at least 1",
            id="bad-skew",
        ),
        pytest.param(
            _with(nodePools=[{"name": "p", "limits": {"karpy.sh/cost": "1"}}]),
            "nodePools[0].limits: unknown limit 'karpy.sh/cost': the only karpy.sh/ limit is"
            " karpy.sh/cost-per-hour",
            id="unknown-karpy-limit",
        ),
        pytest.param(
            _with(nodePools=[{"name": "p", "limits": {"karpy.sh/cost-per-hour": "-1"}}]),
            "nodePools[0].limits: karpy.sh/cost-per-hour must not be negative",
            id="negative-cost-limit",
        ),
        pytest.param(_with(pods="nope"), "pods: expected a list", id="not-a-list"),
        pytest.param(
            _with(options={"maxInstanceTypes": 0}),
            "options.maxInstanceTypes: must be at least 1",
            id="bad-option",
        ),
        pytest.param(
            {
                **BASE,
                "instanceTypes": {
                    "items": [
                        {
                            "name": "x",
                            "capacity": {"cpu": "1"},
                            "offerings": [{"zone": "a", "capacityType": "spot"}],
                        }
                    ]
                },
            },
            "instanceTypes.items[0].offerings[0].price: is required",
            id="missing-price",
        ),
    ],
)
def test_errors_name_the_field(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse(doc)
    assert message in str(err.value)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load(broken)


def test_simulate_reports_bad_input_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodePools: 3\ninstanceTypes: {provider: fake}\n", encoding="utf-8")
    assert simulate_main([str(bad)]) == 2
    assert "nodePools: expected a list" in capsys.readouterr().err


GOLDEN = Path(__file__).parent / "golden"


def test_explain_prints_an_unplaced_pods_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert explain_main([str(GOLDEN / "unplaceable.yaml"), "too-big"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pod default/too-big cannot be placed:")
    assert "insufficient-resources: insufficient cpu (needs 16, 2 types too small)" in out


def test_explain_says_where_a_placed_pod_goes(capsys: pytest.CaptureFixture[str]) -> None:
    assert explain_main([str(GOLDEN / "unplaceable.yaml"), "default/fine", "-o", "json"]) == 0
    out = capsys.readouterr().out
    assert '"placedOn": "general-00001"' in out


def test_explain_unknown_pod(capsys: pytest.CaptureFixture[str]) -> None:
    assert explain_main([str(GOLDEN / "unplaceable.yaml"), "ghost"]) == 2
    assert "not a pending pod" in capsys.readouterr().err


def test_pods_capacity_defaults_to_kubelets_110() -> None:
    catalog = {
        "items": [
            {
                "name": "x",
                "capacity": {"cpu": "1"},
                "offerings": [{"zone": "a", "capacityType": "spot", "price": 1}],
            }
        ]
    }
    node = {"name": "n", "allocatable": {"cpu": "1"}}
    scenario = parse({"nodePools": [{"name": "p"}], "instanceTypes": catalog, "nodes": [node]})
    (it,) = scenario.snapshot.instance_types["p"]
    assert it.capacity.get_amount("pods") == 110_000
    assert scenario.snapshot.nodes[0].allocatable.get_amount("pods") == 110_000


def test_solver_options() -> None:
    options = {"maxInstanceTypes": 5, "preferencePolicy": "Ignore", "minValuesPolicy": "BestEffort"}
    parsed = parse(_with(options=options)).options
    assert parsed.max_instance_types == 5
    assert parsed.preference_policy == "Ignore"
    assert parsed.min_values_policy == "BestEffort"
    with pytest.raises(
        ScenarioError, match=r"options\.minValuesPolicy: 'Sometimes' is not a valid"
    ):
        parse(_with(options={"minValuesPolicy": "Sometimes"}))


def test_the_plan_lists_both_bounds_of_a_requirement() -> None:
    bounds = [
        {"key": "example.com/gen", "operator": "Gt", "values": ["0"]},
        {"key": "example.com/gen", "operator": "Lt", "values": ["5"]},
    ]
    doc = _with(nodePools=[{"name": "default", "requirements": bounds}], pods=[{"name": "a"}])
    scenario = parse(doc)
    plan = plan_dict(solve(scenario.snapshot, list(scenario.pods)), scenario.pods)
    claims: list[dict[str, list[dict[str, object]]]] = plan["nodeclaims"]  # type: ignore[assignment]
    (claim,) = claims
    gen = [r for r in claim["requirements"] if r["key"] == "example.com/gen"]
    assert gen == [
        {"key": "example.com/gen", "operator": "Gt", "values": ["0"]},
        {"key": "example.com/gen", "operator": "Lt", "values": ["5"]},
    ]


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        pytest.param(
            {"name": "a", "requests": {"cpu": "1"}, "containers": [{"requests": {"memory": "z"}}]},
            "pods[0].containers[0].requests.memory: quantity 'z'",
            id="container-after-the-requests-shorthand",
        ),
        pytest.param(
            {"name": "a", "affinity": {"nodeAffinty": {}}},
            "pods[0].affinity: unknown field(s) nodeAffinty",
            id="nested-typo",
        ),
        pytest.param(
            {
                "name": "a",
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "podAffinityTerm": {"topologyKey": ""}}
                        ]
                    }
                },
            },
            "pods[0].affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
            ".podAffinityTerm.topologyKey: must not be empty",
            id="long-affinity-names",
        ),
        pytest.param(
            {"name": "a", "priority": "high"}, "pods[0].priority: invalid value", id="bad-type"
        ),
    ],
)
def test_pod_errors_from_the_shared_decoder_name_the_scenario_field(
    pod: dict[str, object], message: str
) -> None:
    with pytest.raises(ScenarioError) as err:
        parse(_with(pods=[pod]))
    assert message in str(err.value)


def test_a_sidecars_host_ports_count_as_the_operator_counts_them() -> None:
    sidecar = {
        "name": "s",
        "restartPolicy": "Always",
        "ports": [{"containerPort": 9000, "hostPort": 9000}],
    }
    (pod,) = parse(_with(pods=[{"name": "a", "initContainers": [sidecar]}])).pods
    assert [p.port for p in pod.host_ports] == [9000]


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        pytest.param(
            {"name": "a", "requests": {"cpu": "-1"}},
            "pods[0].requests.cpu: must not be negative, got '-1'",
            id="shorthand",
        ),
        pytest.param(
            {"name": "a", "containers": [{"name": "c", "requests": {"memory": "-1Gi"}}]},
            "pods[0].containers[0].requests.memory: must not be negative",
            id="container",
        ),
        pytest.param(
            {"name": "a", "initContainers": [{"name": "i", "requests": {"cpu": "-100m"}}]},
            "pods[0].initContainers[0].requests.cpu: must not be negative",
            id="init-container",
        ),
    ],
)
def test_negative_requests_are_refused_naming_the_field(
    pod: dict[str, object], message: str
) -> None:
    with pytest.raises(ScenarioError) as err:
        parse(_with(pods=[pod]))
    assert message in str(err.value)


def test_an_empty_catalog_is_bad_input_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text(
        "nodePools: [{name: default}]\ninstanceTypes: {items: []}\n"
        "pods: [{name: a, requests: {cpu: '1'}}]\n",
        encoding="utf-8",
    )
    assert simulate_main([str(empty)]) == 2
    assert "instanceTypes: the instance type catalog is empty" in capsys.readouterr().err
    with pytest.raises(ScenarioError, match="catalog is empty"):
        parse({**BASE, "instanceTypes": {"provider": "fake", "count": 0}})


def test_duplicate_pod_names_are_named() -> None:
    pods = [{"name": "web"}, {"name": "db"}, {"name": "web"}, {"name": "db", "namespace": "x"}]
    with pytest.raises(ScenarioError) as err:
        parse(_with(pods=pods))
    assert "pod names must be unique per namespace: default/web repeated" in str(err.value)


def test_explanations_list_only_steps_that_did_something() -> None:
    # No PreferNoSchedule taint anywhere: tolerating them is no step. The pod asks for a zone no
    # type is offered in, so every type is gone at the offering step and nothing after it
    # (resources) appears with "removed 0, 0 left".
    doc = _with(
        pods=[
            {
                "name": "far",
                "requests": {"cpu": "1"},
                "nodeSelector": {wk.LABEL_TOPOLOGY_ZONE: "nowhere"},
            }
        ]
    )
    scenario = parse(doc)
    results = solve(scenario.snapshot, list(scenario.pods), scenario.options)
    (explanation,) = results.unplaced
    assert "tolerated PreferNoSchedule taints" not in explanation.relaxations
    for pool in explanation.nodepools:
        assert all(step.removed > 0 for step in pool.steps), pool.steps
        assert pool.steps[-1].remaining == 0


def test_prefer_no_schedule_is_tolerated_only_where_such_a_taint_exists() -> None:
    doc = {
        "nodePools": [
            {"name": "soft", "taints": [{"key": "k", "effect": "PreferNoSchedule"}]},
        ],
        "instanceTypes": {"provider": "fake", "count": 2},
        "pods": [{"name": "a", "requests": {"cpu": "1"}}],
    }
    scenario = parse(doc)
    results = solve(scenario.snapshot, list(scenario.pods), scenario.options)
    assert not results.unplaced
    assert [r.steps for r in results.relaxed] == [("tolerated PreferNoSchedule taints",)]


CHUNK = {"requests": {"cpu": "1", "memory": "1Gi"}}


def test_capacity_buffers_become_virtual_pods_sized_like_the_controller() -> None:
    scenario = parse(
        _with(
            deployments=[{"name": "web", "replicas": 3, "template": CHUNK}],
            capacityBuffers=[
                {"name": "headroom", "replicas": 2, "template": CHUNK},
                {"name": "share", "deployment": "web", "percentage": 50},
                {"name": "capped", "replicas": 9, "template": CHUNK, "limits": {"cpu": "3"}},
            ],
        )
    )
    names = [p.name for p in scenario.buffers]
    assert names == [
        "capacity-buffer-headroom-1",
        "capacity-buffer-headroom-2",
        "capacity-buffer-share-1",
        "capacity-buffer-share-2",  # 50% of 3, rounded up
        "capacity-buffer-capped-1",
        "capacity-buffer-capped-2",
        "capacity-buffer-capped-3",  # 3 cpu hold three 1-cpu chunks
    ]
    assert {p.owner for p in scenario.buffers if p.name.startswith("capacity-buffer-share")} == {
        "autoscaling.x-k8s.io/CapacityBuffer/default/share"
    }
    assert len(scenario.pods) == 3  # the buffers' pods are not pending pods


@pytest.mark.parametrize(
    ("buffer", "message"),
    [
        ({"name": "b", "replicas": 1}, "exactly one of template and deployment"),
        (
            {"name": "b", "replicas": 1, "template": CHUNK, "deployment": "web"},
            "exactly one of template and deployment",
        ),
        ({"name": "b", "percentage": 10, "template": CHUNK}, "percentage applies only"),
        ({"name": "b", "deployment": "nope", "replicas": 1}, "no deployment 'nope'"),
        ({"name": "b", "template": CHUNK}, "spec.replicas"),
        ({"name": "b", "template": CHUNK, "limits": {"nvidia.com/gpu": "1"}}, "requests none"),
        ({"name": "b", "replicas": 1, "template": CHUNK, "size": 3}, "size"),
    ],
)
def test_bad_capacity_buffers_are_refused_naming_the_field(
    buffer: dict[str, object], message: str
) -> None:
    with pytest.raises(ScenarioError, match="capacityBuffers") as raised:
        parse(
            _with(
                deployments=[{"name": "web", "replicas": 1, "template": CHUNK}],
                capacityBuffers=[buffer],
            )
        )
    assert message in str(raised.value)


def test_simulate_places_buffers_behind_real_pods(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).parents[3] / "docs" / "examples" / "simulate" / "capacity-buffer.yaml"
    assert simulate_main([str(example), "--consolidate"]) == 0
    printed = capsys.readouterr().out
    # web-1 holds a chunk of "headroom" besides api: it is not empty, and not removed.
    assert "web-1  default   m.xlarge       on-demand  zone-a  2     0.1920" in printed
    assert "(none)" in printed
