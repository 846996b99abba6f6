"""The ClusterAPINodeClass CRD's declaration, found by karpy's CRD generator through the
``karpy.apis`` entry point (``clusterapi = "karpy_clusterapi.apis.crds:CRDS"``)."""

from __future__ import annotations

from typing import Final

from karpy.apis.crds import CRDInfo
from karpy_clusterapi.apis.labels import LABELS
from karpy_clusterapi.apis.nodeclass import ClusterAPINodeClass

CRDS: Final = (
    CRDInfo(
        model=ClusterAPINodeClass,
        singular="clusterapinodeclass",
        short_names=("capinc", "capincs"),
        labels=LABELS,
    ),
)
