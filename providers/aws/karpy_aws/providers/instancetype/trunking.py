"""Which instance types can trunk ENIs, and how many branch ENIs each gives pods.

Security Groups for Pods gives each such pod a branch ENI of the node's trunk ENI, and the VPC
resource controller advertises the node's branch ENIs as ``vpc.amazonaws.com/pod-eni``. A pod
asking for that resource fits only a type that can trunk, so the scheduler must see the count
before the node exists. EC2 does not publish it (DescribeInstanceTypes has no such field): the
controller carries a generated table, the one Karpenter reads too. ``trunking.json`` holds its
trunking-capable types and their branch-ENI counts; a type it does not list offers none.

Regenerate it from the controller's Go module (through the Go module proxy)::

    python -m karpy_aws.providers.instancetype.trunking v1.8.2
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Final

MODULE: Final = "github.com/aws/amazon-vpc-resource-controller-k8s"
LIMITS_FILE: Final = "pkg/aws/vpc/limits.go"
DATA_FILE: Final = "trunking.json"
POD_ENI: Final = "vpc.amazonaws.com/pod-eni"

_ENTRY = re.compile(r'^\t"(?P<name>[a-z0-9][a-z0-9.\-]*)": \{$', re.MULTILINE)
_TRUNKING = re.compile(r"^\t\tIsTrunkingCompatible:\s+(?P<value>true|false),$", re.MULTILINE)
_BRANCHES = re.compile(r"^\t\tBranchInterface:\s+(?P<value>\d+),$", re.MULTILINE)


@functools.cache
def _table() -> dict[str, int]:
    text = resources.files(__package__).joinpath(DATA_FILE).read_text()
    data = json.loads(text)
    table: dict[str, int] = data["branchInterfaces"]
    return table


def branch_interfaces(instance_type: str) -> int:
    """Branch ENIs ``instance_type`` offers pods (its ``vpc.amazonaws.com/pod-eni``); 0 for a
    type that cannot trunk or that the table does not know."""
    return _table().get(instance_type, 0)


def parse_limits(go_source: str) -> dict[str, int]:
    """The trunking-capable types of the controller's ``limits.go`` and their branch ENIs.

    Raises ValueError when an entry lacks either field, so a changed file format is noticed
    rather than read as "no type can trunk"."""
    starts = list(_ENTRY.finditer(go_source))
    table: dict[str, int] = {}
    for index, entry in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(go_source)
        block = go_source[entry.end() : end]
        trunking = _TRUNKING.search(block)
        branches = _BRANCHES.search(block)
        if trunking is None or branches is None:
            name = entry["name"]
            msg = f"{LIMITS_FILE}: entry {name!r} has no IsTrunkingCompatible/BranchInterface"
            raise ValueError(msg)
        if trunking["value"] == "true" and int(branches["value"]) > 0:
            table[entry["name"]] = int(branches["value"])
    if not table:
        msg = f"{LIMITS_FILE}: no trunking-capable instance type found"
        raise ValueError(msg)
    return table


def regenerate(version: str, *, timeout: float = 600.0) -> Path:
    """Download the controller's module at ``version`` (``go mod download``) and rewrite
    ``trunking.json`` from its limits table; return the file written."""
    downloaded = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    directory = Path(json.loads(downloaded.stdout)["Dir"])
    table = parse_limits((directory / LIMITS_FILE).read_text())
    target = Path(__file__).with_name(DATA_FILE)
    document = {
        "source": f"{MODULE}@{version} {LIMITS_FILE}",
        "branchInterfaces": dict(sorted(table.items())),
    }
    target.write_text(json.dumps(document, indent=0, sort_keys=False) + "\n")
    return target


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write(f"usage: python -m {__spec__.name if __spec__ else 'trunking'} VERSION\n")
        sys.exit(2)
    sys.stdout.write(f"wrote {regenerate(sys.argv[1])}\n")
