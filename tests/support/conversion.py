"""Tests that register a conversion webhook in the worker's CRDs put the generated placeholders
back afterwards, so later tests on the worker meet the CRDs as installed."""

from __future__ import annotations

from typing import Any

from karpy.apis.crds import all_crds, render_crd
from karpy.operator.conversion import CRD_PATH
from tests.support.kubehttp import KubeHTTP


def merge_patch_of(conversion: dict[str, Any]) -> dict[str, Any]:
    """The rendered conversion stanza as a merge patch: the URL and CA bundle removed."""
    config = conversion["webhook"]["clientConfig"]
    patch = {**conversion["webhook"], "clientConfig": {**config, "url": None, "caBundle": None}}
    return {**conversion, "webhook": patch}


def restore_conversion(kube_http: KubeHTTP) -> None:
    """Back to the generated placeholders, for the rest of the session."""
    for crd in all_crds():
        if crd.served:
            rendered = render_crd(crd)
            kube_http.request(
                "PATCH",
                f"{CRD_PATH}/{rendered['metadata']['name']}",
                {"spec": {"conversion": merge_patch_of(rendered["spec"]["conversion"])}},
                content_type="application/merge-patch+json",
            )
