"""Convert a stream of manifests from Karpenter v0.x to v1, offline.

Provisioners become NodePools (plus their provider's NodeClasses) and AWSNodeTemplates become
EC2NodeClasses, through the same pure translation the legacy controller applies in the cluster
(`karpy.apis.v1alpha5.translate`). v1beta1 documents (Karpenter v0.32-v0.37) become v1 through
the functions karpy's conversion webhook runs (`karpy.apis.conversion`), and a v1beta1
NodePool's `kubelet`, which a conversion of one object cannot move, is moved here into the
NodeClass it references when that NodeClass is in the same input. Every other document passes
through unchanged. Input is checked as strictly as `kubectl apply` checks it (duplicate keys,
unknown fields, the v1alpha5 admission rules), and every problem names its document and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import yaml

from karpy.apis.codec import DecodeError, from_dict, to_dict, unknown_fields
from karpy.apis.conversion import ServedVersion
from karpy.apis.crds import all_crds
from karpy.apis.registry import crd_kinds, registry
from karpy.apis.v1alpha5.machine import Machine
from karpy.apis.v1alpha5.provisioner import Provisioner
from karpy.apis.v1alpha5.translate import (
    LegacyNodeClasses,
    LegacySettings,
    TranslationError,
    translate,
)
from karpy.apis.v1alpha5.validation import validate_provisioner
from karpy.apis.v1beta1 import nodepool as v1beta1
from karpy.apis.v1beta1.convert import NodeClassDefaults
from karpy.apis.v1beta1.validation import validate_nodepool


class ConvertError(ValueError):
    """Input that cannot be converted; each problem names its document and field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate keys, as kubectl's strict decoding does."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            line = key_node.start_mark.line + 1
            msg = f'line {line}: mapping key "{key}" already defined'
            raise yaml.constructor.ConstructorError(None, None, msg, key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


@attrs.frozen(kw_only=True)
class Document:
    """One YAML document of the input, with where it came from (`source#index`)."""

    where: str
    data: Any


def parse_documents(text: str, source: str) -> list[Document]:
    """The non-empty documents of a multi-document YAML stream. Raises ConvertError on YAML that
    does not parse (or repeats a key), naming the source."""
    try:
        loaded = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as error:
        raise ConvertError([f"{source}: invalid YAML: {error}"]) from None
    return [
        Document(where=f"{source}#{i + 1}", data=data)
        for i, data in enumerate(loaded)
        if data is not None
    ]


@attrs.frozen(kw_only=True)
class Converted:
    """The converted stream and a warning per legacy field carried differently."""

    documents: tuple[Mapping[str, Any], ...]
    warnings: tuple[str, ...]


def _label(doc: Document) -> str:
    data = doc.data if isinstance(doc.data, Mapping) else {}
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{doc.where} ({data.get('kind', '?')} {name or '<no name>'})"


def _decode(model: type[Any], doc: Document) -> Any:
    """The document as `model`, refusing unknown fields and undecodable values (and, for a
    Provisioner, whatever the v1alpha5 admission rules refuse), all reported at once."""
    problems = [
        f"{path.removeprefix('$.')}: unknown field" for path in unknown_fields(model, doc.data)
    ]
    data = dict(doc.data)
    if not isinstance(data.get("metadata"), Mapping):
        # Decode the rest anyway, so every problem of the document is reported at once.
        problems.append("metadata.name: Required value")
        data["metadata"] = {}
    try:
        decoded = from_dict(model, data)
    except DecodeError as error:
        problems.extend(error.problems)
        decoded = None
    if isinstance(decoded, Provisioner):
        problems.extend(validate_provisioner(decoded))
    if isinstance(decoded, v1beta1.NodePool):
        problems.extend(validate_nodepool(decoded))
    if problems or decoded is None:
        raise ConvertError([f"{_label(doc)}: {p}" for p in dict.fromkeys(problems)])
    return decoded


def _object(model: object) -> dict[str, Any]:
    """A v1 object as a manifest: karpy writes status, users do not."""
    out = to_dict(model)
    out.pop("status", None)
    return {"apiVersion": out.pop("apiVersion"), "kind": out.pop("kind"), **out}


def _kind_of(data: Any) -> tuple[str, str] | None:
    if isinstance(data, Mapping):
        api_version, kind = data.get("apiVersion"), data.get("kind")
        if isinstance(api_version, str) and isinstance(kind, str):
            return api_version, kind
    return None


def _api_version(model: type[Any]) -> str:
    return f"{model.GROUP}/{model.VERSION}"


def _served_versions() -> dict[tuple[str, str], ServedVersion]:
    return {
        (_api_version(served.model), served.model.KIND): served
        for crd in all_crds()
        for served in crd.served
    }


@attrs.frozen
class _Kubelet:
    """A v1beta1 NodePool's kubelet, bound for the NodeClass it references."""

    where: str
    ref: tuple[str, str, str]
    kubelet: Any


def _move_kubelets(
    out: list[Mapping[str, Any]],
    kubelets: Sequence[_Kubelet],
    warnings: list[str],
    *,
    partial: bool,
) -> list[str]:
    """Set each kubelet as `spec.kubelet` of its NodeClass in `out` (v1 manifests); returns the
    problems: a NodeClass not in the input, two pools asking one class for different kubelets."""
    problems: list[str] = []
    by_class: dict[tuple[str, str, str], list[_Kubelet]] = {}
    for moved in kubelets:
        by_class.setdefault(moved.ref, []).append(moved)
    index = {
        (str(m.get("apiVersion", "")).partition("/")[0], m.get("kind"), m["metadata"]["name"]): i
        for i, m in enumerate(out)
        if isinstance(m.get("metadata"), Mapping) and "name" in m["metadata"]
    }
    for ref, asked in by_class.items():
        group, kind, name = ref
        wire = {**to_dict(asked[0].kubelet)}
        path = "spec.template.spec.kubelet"
        different = [a for a in asked if to_dict(a.kubelet) != to_dict(asked[0].kubelet)]
        if different:
            problems.append(
                f"{asked[0].where} and {different[0].where}: {path}: {kind} {name!r} is shared, "
                "and v1 keeps kubelet on the NodeClass: give each NodePool its own NodeClass"
            )
            continue
        if ref not in index:
            if partial:
                continue  # its document may be one that failed
            problems.append(
                f"{asked[0].where}: {path}: {kind} {name!r} ({group}) is not in the input; "
                "convert it together with this NodePool so the kubelet moves into it"
            )
            continue
        manifest = dict(out[index[ref]])
        spec = dict(manifest.get("spec") or {})
        runtime = wire.pop("containerRuntime", None)
        if runtime is not None:
            warnings.append(
                f"{asked[0].where}: {path}.containerRuntime: {runtime}: not carried; "
                "v1 nodes always run containerd"
            )
        model = _served_or_stored(manifest)
        if model is None or "kubelet" not in {a.name for a in attrs.fields(_spec_type(model))}:
            warnings.extend(
                f"{a.where}: {path}: not carried: {kind} has no kubelet settings" for a in asked
            )
            continue
        if spec.get("kubelet") not in (None, wire):
            problems.append(
                f"{asked[0].where}: {path}: {kind} {name!r} sets a different spec.kubelet"
            )
            continue
        spec["kubelet"] = wire
        manifest["spec"] = spec
        try:
            from_dict(model, manifest)  # what the NodeClass's schema would refuse, named
        except DecodeError as error:
            problems.extend(f"{asked[0].where}: {path}: {p}" for p in error.problems)
            continue
        out[index[ref]] = manifest
        warnings.extend(f"{a.where}: {path}: moved to {kind} {name!r} spec.kubelet" for a in asked)
    return problems


def _served_or_stored(manifest: Mapping[str, Any]) -> type[Any] | None:
    return registry().get((str(manifest.get("apiVersion")), str(manifest.get("kind"))))


def _spec_type(model: type[Any]) -> type[Any]:
    spec = attrs.fields_dict(attrs.resolve_types(model))["spec"].type
    return spec if isinstance(spec, type) else type(None)


def convert(
    documents: Sequence[Document],
    node_classes: LegacyNodeClasses,
    settings: LegacySettings,
    *,
    defaults: NodeClassDefaults,
) -> Converted:
    """Convert `documents`; raises ConvertError listing every problem of every document.
    `defaults` names the provider's NodeClass for v1beta1 references that leave it out."""
    template_models = {(_api_version(m), m.KIND): m for m in node_classes.template_models}
    served = _served_versions()
    # Kinds karpy stores as they are (KWOKNodeClass is at v1alpha1) pass through; a Machine,
    # which karpy serves read-only, has no v1 translation.
    current = {(_api_version(m), m.KIND) for m in crd_kinds() if m is not Machine}
    problems: list[str] = []
    templates: dict[str, tuple[Document, Any]] = {}
    provisioners: dict[int, Provisioner] = {}
    older: dict[int, tuple[ServedVersion, Any]] = {}
    for i, doc in enumerate(documents):
        kind = _kind_of(doc.data)
        try:
            if kind in served:
                older[i] = (served[kind], _decode(served[kind].model, doc))
            elif kind == (_api_version(Provisioner), Provisioner.KIND):
                provisioners[i] = _decode(Provisioner, doc)
            elif kind in template_models:
                template = _decode(template_models[kind], doc)
                if not template.metadata.name:
                    raise ConvertError([f"{_label(doc)}: metadata.name: Required value"])
                templates[template.metadata.name] = (doc, template)
            elif (
                kind is not None
                and kind[0].startswith("karpenter.")
                and ("v1alpha" in kind[0] or "v1beta" in kind[0])
                and kind not in current
            ):
                raise ConvertError(
                    [f"{_label(doc)}: {kind[0]} {kind[1]} has no v1 translation in karpy"]
                )
        except ConvertError as error:
            problems.extend(error.problems)
    if problems:
        raise ConvertError(problems)
    out: list[Mapping[str, Any]] = []
    warnings: list[str] = []
    produced: dict[tuple[str, str], str] = {}
    by_name = {name: template for name, (_, template) in templates.items()}
    template_docs = {id(doc): template for doc, template in templates.values()}

    def emit(objects: Iterable[object], doc: Document) -> None:
        for obj in objects:
            manifest = _object(obj)
            key = (str(manifest["kind"]), str(manifest["metadata"]["name"]))
            if key in produced:
                problems.append(
                    f"{_label(doc)}: produces {key[0]} {key[1]!r}, which {produced[key]} "
                    "produces too; rename one of them"
                )
                continue
            produced[key] = doc.where
            out.append(manifest)

    kubelets: list[_Kubelet] = []
    for i, doc in enumerate(documents):
        try:
            if i in older:
                version, obj = older[i]
                kubelet = None
                if isinstance(obj, v1beta1.NodePool) and obj.spec.template.spec.kubelet:
                    template = obj.spec.template.spec
                    kubelet = template.kubelet
                    obj = attrs.evolve(
                        obj,
                        spec=attrs.evolve(
                            obj.spec,
                            template=attrs.evolve(
                                obj.spec.template, spec=attrs.evolve(template, kubelet=None)
                            ),
                        ),
                    )
                converted = version.to_storage(obj, defaults)
                if kubelet is not None:
                    ref = converted.spec.template.spec.node_class_ref
                    kubelets.append(_Kubelet(_label(doc), (ref.group, ref.kind, ref.name), kubelet))
                emit((converted,), doc)
            elif i in provisioners:
                result = translate(provisioners[i], node_classes, by_name, settings=settings)
                warnings.extend(f"{_label(doc)}: {w}" for w in result.warnings)
                emit((result.nodepool, *result.node_classes), doc)
            elif id(doc) in template_docs:
                translated = node_classes.for_template(template_docs[id(doc)], settings=settings)
                warnings.extend(f"{_label(doc)}: {w}" for w in translated.warnings)
                emit((translated.node_class,), doc)
            else:
                out.append(doc.data)
        except TranslationError as error:
            problems.extend(f"{_label(doc)}: {p}" for p in error.problems)
    # With other problems the output is partial: report only the kubelet conflicts then.
    problems.extend(_move_kubelets(out, kubelets, warnings, partial=bool(problems)))
    if problems:
        raise ConvertError(problems)
    return Converted(documents=tuple(out), warnings=tuple(warnings))


def render(converted: Converted) -> str:
    """The converted stream as multi-document YAML."""
    return "".join(
        "---\n" + yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, width=100)
        for doc in converted.documents
    )
