"""The kwok catalog: the shipped catalog.json is exactly what the documented formulas produce,
its shapes are the promised ones, and malformed catalogs or selectors are refused by name.
(Pure tests; they live beside the kwok cluster tests but need no cluster.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import Offering
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import CPU, MEMORY, Resources
from karpy_kwok import gencatalog
from karpy_kwok.apis import labels as kwoklabels
from karpy_kwok.catalog import (
    CATALOG_FILE,
    CatalogError,
    OfferingSelector,
    instance_types,
    load_entries,
)

PACKAGE = Path(gencatalog.__file__).parent


def test_the_shipped_catalog_is_the_generated_one() -> None:
    shipped = orjson.loads((PACKAGE / CATALOG_FILE).read_bytes())
    assert shipped == orjson.loads(orjson.dumps(gencatalog.generate()))


def test_families_sizes_arches_and_zones() -> None:
    types = {it.name: it for it in instance_types(load_entries())}
    assert len(types) == 4 * 2 * 5
    families = {name.split(".")[0] for name in types}
    assert families == {"c5", "m5", "r5", "t3", "c6g", "m6g", "r6g", "t4g"}
    sizes = {name.split(".")[1] for name in types}
    assert sizes == {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge"}
    for name, it in types.items():
        arch = wk.ARCH_ARM64 if name.split(".")[0].endswith("g") else wk.ARCH_AMD64
        assert it.requirements.single_value(wk.LABEL_ARCH) == arch
        assert {(o.zone, o.capacity_type) for o in it.offerings} == {
            (zone, ct)
            for zone in ("test-zone-a", "test-zone-b", "test-zone-c")
            for ct in (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)
        }
    assert types["m5.large"].capacity == Resources.of({CPU: 2, MEMORY: "8Gi", "pods": 110})
    assert types["r6g.8xlarge"].capacity.get_amount(MEMORY) == Resources.of(
        {MEMORY: "256Gi"}
    ).get_amount(MEMORY)


def _price(offerings: tuple[Offering, ...], zone: str, capacity_type: str) -> float:
    (price,) = [o.price for o in offerings if (o.zone, o.capacity_type) == (zone, capacity_type)]
    return price


def test_prices_follow_the_formulas() -> None:
    types = {it.name: it for it in instance_types(load_entries())}
    m5 = types["m5.large"].offerings
    assert _price(m5, "test-zone-a", "on-demand") == round(0.031 * 2 + 0.0043 * 8, 4)
    assert _price(m5, "test-zone-b", "spot") == round(
        _price(m5, "test-zone-b", "on-demand") * 0.35, 4
    )
    for name, it in types.items():
        family, size = name.split(".")
        if family.endswith("g"):
            continue
        arm = {"c5": "c6g", "m5": "m6g", "r5": "r6g", "t3": "t4g"}[family]
        od = _price(it.offerings, "test-zone-a", "on-demand")
        assert _price(types[f"{arm}.{size}"].offerings, "test-zone-a", "on-demand") < od
        spots = [
            _price(it.offerings, z, "spot") for z in ("test-zone-a", "test-zone-b", "test-zone-c")
        ]
        assert spots == sorted(spots)
        assert max(spots) < od


def test_overhead_is_the_kube_reserved_formula() -> None:
    assert gencatalog.kube_reserved_cpu_millis(2) == 70
    assert gencatalog.kube_reserved_cpu_millis(4) == 80
    assert gencatalog.kube_reserved_cpu_millis(32) == 150
    assert gencatalog.kube_reserved_memory_mib(110) == 1465
    m5 = next(it for it in instance_types(load_entries()) if it.name == "m5.large")
    assert m5.overhead == Resources.of({CPU: "70m", MEMORY: "1565Mi"})


def test_selectors_mark_offerings_unavailable() -> None:
    selector = OfferingSelector.parse("m5.*:test-zone-a")
    types = {it.name: it for it in instance_types(load_entries(), unavailable=[selector])}
    off = {(o.zone, o.capacity_type) for o in types["m5.xlarge"].offerings if not o.available}
    assert off == {("test-zone-a", "spot"), ("test-zone-a", "on-demand")}
    assert types["m5.xlarge"].requirements.get(wk.LABEL_TOPOLOGY_ZONE) is not None
    assert all(o.available for o in types["c5.large"].offerings)


@pytest.mark.parametrize(
    "text", [pytest.param("a:b:c:d", id="too-many"), pytest.param("m5.large::spot", id="empty")]
)
def test_bad_selectors_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="offering selector"):
        OfferingSelector.parse(text)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"[]", "non-empty JSON array", id="empty"),
        pytest.param(b"{", "instance catalog", id="not-json"),
        pytest.param(
            orjson.dumps([{"name": "x.large"}]), r"entry \[0\] \(x.large\)", id="missing-fields"
        ),
        pytest.param(
            orjson.dumps(gencatalog.generate()[:1] * 2), "duplicate instance types", id="duplicate"
        ),
    ],
)
def test_malformed_catalogs_are_refused_by_entry(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "catalog.json"
    path.write_bytes(content)
    with pytest.raises(CatalogError, match=message):
        load_entries(path)


@pytest.mark.parametrize(
    ("key", "operator", "values", "keeps"),
    [
        pytest.param(
            kwoklabels.LABEL_KWOK_INSTANCE_CPU, "Lt", ("5",), lambda e: e.cpu < 5, id="cpu"
        ),
        pytest.param(
            kwoklabels.LABEL_KWOK_INSTANCE_MEMORY,
            "Gt",
            ("65536",),
            lambda e: e.memory_mib > 65536,
            id="memory",
        ),
        pytest.param(
            kwoklabels.LABEL_KWOK_INSTANCE_FAMILY,
            "In",
            ("c5", "m5"),
            lambda e: e.family in {"c5", "m5"},
            id="family",
        ),
        pytest.param(
            kwoklabels.LABEL_KWOK_INSTANCE_SIZE,
            "NotIn",
            ("large",),
            lambda e: e.size != "large",
            id="size",
        ),
        pytest.param(
            kwoklabels.LABEL_KWOK_INSTANCE_TYPE,
            "In",
            ("c5.2xlarge",),
            lambda e: e.name == "c5.2xlarge",
            id="type",
        ),
    ],
)
def test_a_requirement_on_each_declared_label_selects_types(
    key: str, operator: str, values: tuple[str, ...], keeps: Any
) -> None:
    """Every well-known label the provider declares is set on its types, so requirements on it
    select: a NodePool asking for fewer than 5 CPUs never gets an 8xlarge."""
    assert set(kwoklabels.KWOK_WELL_KNOWN_LABELS) == {
        kwoklabels.LABEL_KWOK_INSTANCE_CPU,
        kwoklabels.LABEL_KWOK_INSTANCE_MEMORY,
        kwoklabels.LABEL_KWOK_INSTANCE_FAMILY,
        kwoklabels.LABEL_KWOK_INSTANCE_SIZE,
        kwoklabels.LABEL_KWOK_INSTANCE_TYPE,
    }
    entries = load_entries()
    wanted = Requirements((Requirement.new(key, operator, values),))
    selected = {
        t.name for t in instance_types(entries) if t.requirements.compatible(wanted) is None
    }
    expected = {e.name for e in entries if keeps(e)}
    assert expected, "the case selects some types"
    assert expected != {e.name for e in entries}, "the case leaves some types out"
    assert selected == expected
