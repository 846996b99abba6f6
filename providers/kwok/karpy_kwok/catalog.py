"""The kwok provider's instance types: catalog.json decoded, with availability knobs applied.

The catalog is read once into frozen values; which offerings are "out of capacity" is a separate,
changeable set of `OfferingSelector`s (from the provider's settings, or set by tests), applied
when instance types are asked for. So simulating an insufficient-capacity event never rewrites
the catalog, and clearing the knob restores it exactly.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

import attrs
import cattrs
import orjson

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.resources import CPU, MEMORY, PODS, Resources
from karpy_kwok.apis import labels as kwoklabels

CATALOG_FILE = "catalog.json"


class CatalogError(ValueError):
    """The catalog file is unreadable or malformed; the message names the file and the entry."""


@attrs.frozen(kw_only=True)
class CatalogOverhead:
    cpu_millis: int
    memory_mib: int


@attrs.frozen(kw_only=True)
class CatalogOffering:
    zone: str
    capacity_type: str
    price: float


@attrs.frozen(kw_only=True)
class CatalogEntry:
    """One instance type as catalog.json spells it."""

    name: str
    family: str
    size: str
    arch: str
    cpu: int
    memory_mib: int
    pods: int
    overhead: CatalogOverhead
    offerings: tuple[CatalogOffering, ...]


_CONVERTER = cattrs.Converter(forbid_extra_keys=True)


@attrs.frozen
class OfferingSelector:
    """Offerings to treat as out of capacity: shell patterns on type, zone and capacity type.

    Written ``<instance-type>:<zone>:<capacity-type>``, e.g. ``m5.*:test-zone-a:spot``.
    """

    instance_type: str
    zone: str = "*"
    capacity_type: str = "*"

    @classmethod
    def parse(cls, text: str) -> OfferingSelector:
        parts = text.strip().split(":")
        if len(parts) > 3 or not all(parts):
            msg = (
                f"offering selector {text!r}: expected <instance-type>[:<zone>[:<capacity-type>]]"
                " with non-empty parts"
            )
            raise ValueError(msg)
        return cls(*parts)

    def matches(self, instance_type: str, offering: Offering) -> bool:
        return (
            fnmatch.fnmatchcase(instance_type, self.instance_type)
            and fnmatch.fnmatchcase(offering.zone, self.zone)
            and fnmatch.fnmatchcase(offering.capacity_type, self.capacity_type)
        )


def load_entries(path: Path | None = None) -> tuple[CatalogEntry, ...]:
    """Decode a catalog file (the packaged catalog.json when `path` is None)."""
    where = str(path) if path is not None else f"karpy_kwok/{CATALOG_FILE}"
    try:
        if path is None:
            data = resources.files("karpy_kwok").joinpath(CATALOG_FILE).read_bytes()
        else:
            data = path.read_bytes()
        raw = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError) as error:
        msg = f"instance catalog {where}: {error}"
        raise CatalogError(msg) from error
    if not isinstance(raw, list) or not raw:
        msg = f"instance catalog {where}: expected a non-empty JSON array of instance types"
        raise CatalogError(msg)
    entries = []
    for index, item in enumerate(raw):
        try:
            entries.append(_CONVERTER.structure(item, CatalogEntry))
        except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as error:
            name = item.get("name", "?") if isinstance(item, dict) else "?"
            detail = (
                "; ".join(cattrs.transform_error(error))
                if isinstance(error, cattrs.BaseValidationError)
                else str(error)
            )
            msg = f"instance catalog {where}: entry [{index}] ({name}): {detail}"
            raise CatalogError(msg) from error
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        msg = f"instance catalog {where}: duplicate instance types {', '.join(duplicates)}"
        raise CatalogError(msg)
    return tuple(entries)


def instance_type(
    entry: CatalogEntry, *, unavailable: Iterable[OfferingSelector] = ()
) -> InstanceType:
    """The scheduler's view of one catalog entry; offerings matched by `unavailable` are kept but
    marked ``available=False``."""
    selectors = tuple(unavailable)
    capacity = Resources.of({CPU: entry.cpu, MEMORY: f"{entry.memory_mib}Mi", PODS: entry.pods})
    overhead = Resources.of(
        {CPU: f"{entry.overhead.cpu_millis}m", MEMORY: f"{entry.overhead.memory_mib}Mi"}
    )
    offerings = []
    for o in entry.offerings:
        offering = Offering(o.zone, o.capacity_type, o.price)
        if any(s.matches(entry.name, offering) for s in selectors):
            offering = attrs.evolve(offering, available=False)
        offerings.append(offering)
    return InstanceType.make(
        entry.name,
        capacity,
        offerings,
        overhead=overhead,
        labels=type_labels(entry),
    )


def type_labels(entry: CatalogEntry) -> dict[str, str]:
    """Every well-known label the provider declares for a type (`kwoklabels.KWOK_WELL_KNOWN_LABELS`,
    plus arch and os), so a NodePool or pod requirement on any of them selects types, as
    Karpenter's kwok provider labels its types. CPU is a count and memory MiB, as integers."""
    return {
        wk.LABEL_ARCH: entry.arch,
        wk.LABEL_OS: wk.OS_LINUX,
        kwoklabels.LABEL_KWOK_INSTANCE_TYPE: entry.name,
        kwoklabels.LABEL_KWOK_INSTANCE_FAMILY: entry.family,
        kwoklabels.LABEL_KWOK_INSTANCE_SIZE: entry.size,
        kwoklabels.LABEL_KWOK_INSTANCE_CPU: str(entry.cpu),
        kwoklabels.LABEL_KWOK_INSTANCE_MEMORY: str(entry.memory_mib),
    }


def instance_types(
    entries: Sequence[CatalogEntry], *, unavailable: Iterable[OfferingSelector] = ()
) -> tuple[InstanceType, ...]:
    selectors = tuple(unavailable)
    return tuple(instance_type(e, unavailable=selectors) for e in entries)


def shipped_instance_types() -> tuple[InstanceType, ...]:
    """The shipped catalog, every offering available: what `karpy simulate` reads for a scenario
    whose catalog says ``provider: kwok`` (entry-point group ``karpy.catalogs``)."""
    return instance_types(load_entries())
