"""The kwok half of the v1alpha5 -> v1 translation: every Provisioner gets its own KWOKNodeClass.

kwok simulates nodes, so v0.x AWS launch settings (inline provider, providerRef) and kubelet
settings have nothing to act on; each is named in a warning, never dropped in silence, and the
rest of the Provisioner (requirements, labels, taints, limits, TTLs) behaves as it would on AWS.
Declared under the ``karpy.legacy`` entry point as `NODE_CLASSES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from karpy.apis.meta import ObjectMeta
from karpy.apis.v1.common import NodeClassReference
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.apis.v1alpha5.translate import (
    FieldWarning,
    LegacySettings,
    NodeClassTranslation,
    TemplateTranslation,
)
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass

_NOT_CARRIED: Final = "not carried: the kwok provider simulates nodes and has no {what}"


@attrs.frozen
class KwokLegacyNodeClasses:
    """`karpy.apis.v1alpha5.translate.LegacyNodeClasses` for the kwok provider."""

    @property
    def template_models(self) -> tuple[type[Any], ...]:
        return ()

    def for_provisioner(
        self, provisioner: Provisioner, templates: Mapping[str, Any], *, settings: LegacySettings
    ) -> NodeClassTranslation:
        del templates, settings  # kwok has no node templates and no cluster-scoped defaults
        spec = provisioner.spec
        name = provisioner.metadata.name or ""
        warnings = []
        if spec.provider is not None:
            warnings.append(
                FieldWarning("spec.provider", _NOT_CARRIED.format(what="AWS launch settings"))
            )
        if spec.provider_ref is not None:
            warnings.append(
                FieldWarning("spec.providerRef", _NOT_CARRIED.format(what="node templates"))
            )
        if spec.kubelet_configuration is not None:
            warnings.append(
                FieldWarning("spec.kubeletConfiguration", _NOT_CARRIED.format(what="kubelet"))
            )
        return NodeClassTranslation(
            ref=NodeClassReference(group=KWOKNodeClass.GROUP, kind=KWOKNodeClass.KIND, name=name),
            node_classes=(KWOKNodeClass(metadata=ObjectMeta(name=name)),),
            warnings=tuple(warnings),
        )

    def for_template(self, template: Any, *, settings: LegacySettings) -> TemplateTranslation:
        msg = f"the kwok provider has no legacy node templates ({type(template).__name__})"
        raise TypeError(msg)


NODE_CLASSES: Final = KwokLegacyNodeClasses()
