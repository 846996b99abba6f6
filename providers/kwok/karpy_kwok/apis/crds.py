"""The KWOKNodeClass CRD's declaration, found by karpy's CRD generator through the
``karpy.apis`` entry point (``kwok = "karpy_kwok.apis.crds:CRDS"``): karpy never imports a
provider, so the provider hands over its model and its names, and the label names karpy's own
CRDs must know (`karpy_kwok.apis.labels.LABELS`)."""

from __future__ import annotations

from typing import Final

from karpy.apis.crds import CRDInfo
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass
from karpy_kwok.apis.labels import LABELS

CRDS: Final = (
    CRDInfo(
        model=KWOKNodeClass,
        singular="kwoknodeclass",
        short_names=("kwoknc", "kwokncs"),
        labels=LABELS,
    ),
)
