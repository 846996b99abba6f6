"""NodeOverlay benchmark: what applying overlays costs on every instance-type fetch.

Run: ``.venv/bin/python benchmarks/overlays.py [--types 40,400,800] [--overlays 1,10,50]``

The overlay wrapper applies the NodeOverlays to the provider's catalog on every
``GetInstanceTypes`` (each provisioning batch, each disruption pass), and the nodeoverlay
controller resolves them against every NodePool's catalog. This times both, pure core only
(karpy.core.overlays): ``apply`` for one NodePool, and ``resolve`` over one pool, on the fake
catalog (karpy.testing.instancetypes), with overlays that each select a fifth of the types by
name, half setting a price adjustment and half adding an extended resource, at distinct
weights (so none conflict). Reported: median CPU milliseconds (process time, which moves
less than wall time with the load of a shared machine) over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable

from karpy.apis.v1 import labels as wk
from karpy.core.overlays import (
    Overlay,
    PoolCatalog,
    apply,
    make_overlay,
    order,
    pool_requirements,
    resolve,
)
from karpy.testing.instancetypes import make_instance_types


def _overlays(count: int, names: list[str]) -> tuple[Overlay, ...]:
    out = []
    for i in range(count):
        picked = tuple(names[j] for j in range(i % 5, len(names), 5))
        out.append(
            make_overlay(
                f"overlay-{i:03d}",
                weight=i + 1,
                requirements=((wk.LABEL_INSTANCE_TYPE, "In", picked),),
                price_adjustment="-10%" if i % 2 == 0 else None,
                capacity={f"example.com/r{i}": "1"} if i % 2 else None,
            )
        )
    return order(out)


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.process_time()
        run()
        samples.append((time.process_time() - started) * 1000)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--types", default="40,400,800")
    parser.add_argument("--overlays", default="1,10,50")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    pool = pool_requirements("default", {})
    sys.stdout.write("types  overlays  apply cpu-ms  resolve cpu-ms\n")
    for n_types in (int(v) for v in args.types.split(",")):
        catalog = make_instance_types(n_types)
        names = [t.name for t in catalog]
        for n_overlays in (int(v) for v in args.overlays.split(",")):
            overlays = _overlays(n_overlays, names)
            applied_ms = _median_ms(functools.partial(apply, catalog, pool, overlays), args.repeat)
            catalogs = [PoolCatalog(pool, catalog)]
            resolved_ms = _median_ms(functools.partial(resolve, overlays, catalogs), args.repeat)
            sys.stdout.write(
                f"{n_types:5d}  {n_overlays:8d}  {applied_ms:12.1f}  {resolved_ms:14.1f}\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
