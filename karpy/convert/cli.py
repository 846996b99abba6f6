"""``karpy convert FILE|DIR|-``: Karpenter v0.x manifests (v1alpha5, v1beta1) in, v1 manifests
out, offline.

Writes the converted stream to stdout (or ``-o FILE``) and one line per legacy field it carries
differently to stderr. Exit codes: 0 converted, 1 invalid input (every problem printed with its
document and field), 2 bad usage (unreadable path, unknown provider).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from karpy.apis.registry import provider_node_class
from karpy.apis.v1alpha5.translate import LegacySettings, legacy_node_classes
from karpy.apis.v1beta1.convert import NodeClassDefaults
from karpy.convert.documents import ConvertError, Document, convert, parse_documents, render

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


def _read(paths: list[str]) -> list[Document]:
    """Every document of every path: a file, a directory (its *.yaml, *.yml, *.json, sorted)
    or - for stdin. Raises OSError for unreadable paths, ConvertError for bad YAML."""
    documents: list[Document] = []
    for path in paths:
        if path == "-":
            documents += parse_documents(sys.stdin.read(), "<stdin>")
            continue
        p = Path(path)
        files = (
            sorted(f for f in p.iterdir() if f.suffix in {".yaml", ".yml", ".json"})
            if p.is_dir()
            else [p]
        )
        for file in files:
            documents += parse_documents(file.read_text(encoding="utf-8"), str(file))
    return documents


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="karpy convert",
        description=("Convert Karpenter v0.x manifests (v1alpha5 and v1beta1) to karpenter.sh/v1."),
    )
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR|-", help="manifests to convert")
    parser.add_argument(
        "--provider",
        default=os.environ.get("KARPY_PROVIDER", "aws"),
        help="provider whose NodeClasses to write (aws, kwok); default aws",
    )
    parser.add_argument(
        "--cluster-name",
        default=os.environ.get("CLUSTER_NAME", ""),
        help="cluster name for the v0.x default subnet/security-group discovery tags",
    )
    parser.add_argument(
        "--instance-profile",
        default=None,
        help="instance profile for templates that set none (v0.x aws.defaultInstanceProfile)",
    )
    parser.add_argument("-o", "--output", default="-", help="output file (default stdout)")
    args = parser.parse_args(argv)
    try:
        node_classes = legacy_node_classes(args.provider)
        group, kind = provider_node_class(args.provider)
        documents = _read(args.paths)
    except (LookupError, OSError) as error:
        sys.stderr.write(f"error: {error}\n")
        return EXIT_USAGE
    except ConvertError as error:
        sys.stderr.write("".join(f"error: {p}\n" for p in error.problems))
        return EXIT_INVALID
    settings = LegacySettings(
        cluster_name=args.cluster_name, default_instance_profile=args.instance_profile
    )
    try:
        # Written back as v1, so references name each NodeClass's stored version.
        converted = convert(
            documents, node_classes, settings, defaults=NodeClassDefaults(group=group, kind=kind)
        )
    except ConvertError as error:
        sys.stderr.write("".join(f"error: {p}\n" for p in error.problems))
        return EXIT_INVALID
    sys.stderr.write("".join(f"warning: {w}\n" for w in converted.warnings))
    text = render(converted)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return EXIT_OK
