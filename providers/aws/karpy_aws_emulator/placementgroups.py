"""Placement groups, which moto does not have: Create, Describe and DeletePlacementGroups.

An EC2NodeClass's ``placementGroupSelector`` names a group by name or id; karpy resolves it with
DescribePlacementGroups and launches into it. moto answers every placement-group call with
"not implemented" (HTTP 500), so ``install()`` adds the three actions to moto's EC2 responses,
with EC2's fields (name, id, ARN, strategy, state, partition count, spread level, tags) and
its errors for unknown names and ids. Groups are kept per account and region, like moto's
own state, for the server's lifetime. Launch constraints (one zone for a cluster group, seven
instances per zone for a spread group) are EC2's to enforce at launch and are not emulated.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

_installed = threading.Event()
_lock = threading.Lock()
_groups: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}


def install() -> None:
    """Add the placement-group actions to moto's EC2 responses. Imports moto."""
    if _installed.is_set():
        return
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses import EC2Response

    def _store(self: Any) -> dict[str, dict[str, Any]]:
        return _groups.setdefault((str(self.current_account), str(self.region)), {})

    def create_placement_group(self: Any) -> Any:
        name = str(self._get_param("GroupName"))
        strategy = str(self._get_param("Strategy") or "cluster")
        if strategy not in ("cluster", "partition", "spread"):
            raise EC2ClientError(
                "InvalidParameterValue", f"Value ({strategy}) for parameter strategy is invalid."
            )
        group_id = f"pg-{secrets.token_hex(8)}"
        group: dict[str, Any] = {
            "GroupName": name,
            "GroupId": group_id,
            "GroupArn": (
                f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}"
            ),
            "Strategy": strategy,
            "State": "available",
            "Tags": [
                tag
                for spec in self._get_param("TagSpecifications", [])
                for tag in spec.get("Tags", [])
            ],
        }
        if strategy == "partition":
            group["PartitionCount"] = int(self._get_param("PartitionCount") or 2)
        if strategy == "spread":
            group["SpreadLevel"] = str(self._get_param("SpreadLevel") or "rack")
        with _lock:
            store = _store(self)
            if name in store:
                raise EC2ClientError(
                    "InvalidPlacementGroup.Duplicate",
                    f"The Placement Group '{name}' already exists.",
                )
            store[name] = group
        return ActionResult({"PlacementGroup": group})

    def describe_placement_groups(self: Any) -> Any:
        names = [str(n) for n in self._get_param("GroupNames", [])]
        ids = [str(i) for i in self._get_param("GroupIds", [])]
        with _lock:
            groups = list(_store(self).values())
        found = [
            g
            for g in groups
            if (not names or g["GroupName"] in names) and (not ids or g["GroupId"] in ids)
        ]
        for name in names:
            if name not in {g["GroupName"] for g in found}:
                raise EC2ClientError(
                    "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."
                )
        for group_id in ids:
            if group_id not in {g["GroupId"] for g in found}:
                raise EC2ClientError(
                    "InvalidPlacementGroup.Unknown",
                    f"The Placement Group '{group_id}' is unknown.",
                )
        return ActionResult({"PlacementGroups": found})

    def delete_placement_group(self: Any) -> Any:
        name = str(self._get_param("GroupName"))
        with _lock:
            if _store(self).pop(name, None) is None:
                raise EC2ClientError(
                    "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."
                )
        return ActionResult({})

    EC2Response.create_placement_group = create_placement_group  # type: ignore[attr-defined]
    EC2Response.describe_placement_groups = describe_placement_groups  # type: ignore[attr-defined]
    EC2Response.delete_placement_group = delete_placement_group  # type: ignore[attr-defined]
    _installed.set()
