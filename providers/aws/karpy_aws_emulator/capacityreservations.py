"""On-demand capacity reservations, which moto does not have, and CreateFleet launching into them.

An EC2NodeClass's ``capacityReservationSelectorTerms`` select reservations with
DescribeCapacityReservations; karpy offers their instance types as ``reserved`` capacity and
launches into one by naming it in the launch template (``CapacityReservationSpecification``).
moto answers every reservation call with "not implemented" (HTTP 500) and ignores the template's
reservation, so ``install()`` adds Create, Describe and CancelCapacityReservation(s) with EC2's
fields and filters, and wraps CreateFleet: a launch whose template targets a reservation takes
one of its instances, and one that targets a full, cancelled or unknown reservation fails with
EC2's ``ReservationCapacityExceeded`` (or ``InvalidCapacityReservationId.NotFound``) entry in
``Errors``, launching nothing. A reservation's free count is its total less its instances still
alive, so terminating one frees its slot as on EC2. Open reservations are not taken by untargeted
launches (karpy's templates opt out of them); that EC2 rule is not emulated.
"""

from __future__ import annotations

import functools
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any

_installed = threading.Event()
_lock = threading.Lock()
_reservations: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
_members: dict[str, set[str]] = {}
"""Reservation id -> the instances launched into it."""

EXCEEDED_CODE = "ReservationCapacityExceeded"
NOT_FOUND_CODE = "InvalidCapacityReservationId.NotFound"
_GONE_STATES = frozenset({"terminated", "shutting-down"})


def _matches(reservation: Mapping[str, Any], name: str, values: list[str]) -> bool:
    tags = {t["Key"]: t["Value"] for t in reservation.get("Tags", [])}
    if name.startswith("tag:"):
        return tags.get(name[4:]) in values
    if name == "tag-key":
        return any(v in tags for v in values)
    fields = {
        "owner-id": "OwnerId",
        "instance-match-criteria": "InstanceMatchCriteria",
        "state": "State",
        "instance-type": "InstanceType",
        "availability-zone": "AvailabilityZone",
        "reservation-type": "ReservationType",
    }
    key = fields.get(name)
    return key is not None and str(reservation.get(key)) in values


def _target(data: Mapping[str, Any]) -> str | None:
    spec = data.get("CapacityReservationSpecification") or {}
    target = spec.get("CapacityReservationTarget") or {}
    found = target.get("CapacityReservationId")
    return str(found) if found else None


def _config_target(self: Any, config: Mapping[str, Any]) -> str | None:
    """The reservation one LaunchTemplateConfig's template launches into, if any."""
    spec = config.get("LaunchTemplateSpecification", {})
    if spec.get("LaunchTemplateName"):
        template = self.ec2_backend.get_launch_template_by_name(str(spec["LaunchTemplateName"]))
    elif spec.get("LaunchTemplateId"):
        template = self.ec2_backend.get_launch_template(str(spec["LaunchTemplateId"]))
    else:
        return None
    return _target(template.latest_version().data)


def _launch_only(self: Any, original: Callable[[Any], Any], config: Mapping[str, Any]) -> Any:
    """moto's CreateFleet as if ``config`` were the request's only LaunchTemplateConfig (moto
    launches its first config's first override, whatever EC2 would have chosen)."""
    read = self._get_param

    def only(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "LaunchTemplateConfigs":
            return [config]
        return read(name, *args, **kwargs)

    self._get_param = only
    try:
        return original(self)
    finally:
        del self._get_param


def install() -> None:
    """Add the capacity-reservation actions to moto's EC2 responses and make CreateFleet
    launch into them. Imports moto; call after idempotency's and fleetcontext's."""
    if _installed.is_set():
        return
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses import EC2Response
    from moto.ec2.responses.fleets import Fleets

    def _store(self: Any) -> dict[str, dict[str, Any]]:
        return _reservations.setdefault((str(self.current_account), str(self.region)), {})

    def _alive(self: Any, reservation_id: str) -> int:
        live = 0
        for instance_id in _members.get(reservation_id, ()):
            instance = self.ec2_backend.get_instance_by_id(instance_id)
            if instance is not None and instance.state not in _GONE_STATES:
                live += 1
        return live

    def _view(self: Any, reservation: dict[str, Any]) -> dict[str, Any]:
        used = _alive(self, reservation["CapacityReservationId"])
        free = reservation["TotalInstanceCount"] - used if reservation["State"] == "active" else 0
        return {**reservation, "AvailableInstanceCount": max(free, 0)}

    def create_capacity_reservation(self: Any) -> Any:
        zone = str(self._get_param("AvailabilityZone"))
        count = int(self._get_param("InstanceCount"))
        reservation_id = f"cr-{secrets.token_hex(8)}"
        end = self._get_param("EndDate")
        reservation: dict[str, Any] = {
            "CapacityReservationId": reservation_id,
            "OwnerId": str(self.current_account),
            "CapacityReservationArn": (
                f"arn:aws:ec2:{self.region}:{self.current_account}:"
                f"capacity-reservation/{reservation_id}"
            ),
            "InstanceType": str(self._get_param("InstanceType")),
            "InstancePlatform": str(self._get_param("InstancePlatform") or "Linux/UNIX"),
            "AvailabilityZone": zone,
            "Tenancy": str(self._get_param("Tenancy") or "default"),
            "TotalInstanceCount": count,
            "InstanceMatchCriteria": str(self._get_param("InstanceMatchCriteria") or "open"),
            "State": "active",
            "EndDateType": "limited" if end else "unlimited",
            "ReservationType": "default",
            "Tags": [
                tag
                for spec in self._get_param("TagSpecifications", [])
                for tag in spec.get("Tags", [])
            ],
        }
        if end:
            reservation["EndDate"] = end
        with _lock:
            _store(self)[reservation_id] = reservation
            view = _view(self, reservation)
        return ActionResult({"CapacityReservation": view})

    def describe_capacity_reservations(self: Any) -> Any:
        ids = [str(i) for i in self._get_param("CapacityReservationIds", [])]
        filters = [
            (str(f["Name"]), [str(v) for v in f.get("Values", [])])
            for f in self._get_param("Filters", [])
        ]
        with _lock:
            store = _store(self)
            for reservation_id in ids:
                if reservation_id not in store:
                    raise EC2ClientError(
                        NOT_FOUND_CODE,
                        f"The capacity reservation ID '{reservation_id}' does not exist",
                    )
            found = [
                _view(self, r)
                for r in store.values()
                if (not ids or r["CapacityReservationId"] in ids)
                and all(_matches(r, name, values) for name, values in filters)
            ]
        return ActionResult({"CapacityReservations": found})

    def cancel_capacity_reservation(self: Any) -> Any:
        reservation_id = str(self._get_param("CapacityReservationId"))
        with _lock:
            reservation = _store(self).get(reservation_id)
            if reservation is None:
                raise EC2ClientError(
                    NOT_FOUND_CODE, f"The capacity reservation ID '{reservation_id}' does not exist"
                )
            reservation["State"] = "cancelled"
        return ActionResult({"Return": True})

    original: Callable[[Any], Any] = Fleets.create_fleet

    @functools.wraps(original)
    def create_fleet(self: Any) -> Any:
        configs = list(self._get_param("LaunchTemplateConfigs", []))
        targeted = [(config, _config_target(self, config)) for config in configs]
        if all(reservation_id is None for _, reservation_id in targeted):
            return original(self)
        errors: list[dict[str, Any]] = []
        with _lock:
            store = _store(self)
            for config, reservation_id in targeted:
                code = None
                if reservation_id is not None:
                    reservation = store.get(reservation_id)
                    if reservation is None:
                        code, message = (
                            NOT_FOUND_CODE,
                            (f"The capacity reservation ID '{reservation_id}' does not exist"),
                        )
                    elif _view(self, reservation)["AvailableInstanceCount"] <= 0:
                        code, message = (
                            EXCEEDED_CODE,
                            (
                                "There is insufficient capacity in the capacity reservation "
                                f"{reservation_id}"
                            ),
                        )
                if code is not None:
                    errors.extend(
                        {
                            "LaunchTemplateAndOverrides": {
                                "LaunchTemplateSpecification": config.get(
                                    "LaunchTemplateSpecification", {}
                                ),
                                "Overrides": override,
                            },
                            "Lifecycle": "on-demand",
                            "ErrorCode": code,
                            "ErrorMessage": message,
                        }
                        for override in config.get("Overrides", []) or [{}]
                    )
                    continue
                result = _launch_only(self, original, config)
                answer = getattr(result, "result", {})
                if reservation_id is not None:
                    for entry in answer.get("Instances", []):
                        members = _members.setdefault(reservation_id, set())
                        members.update(str(i) for i in entry.get("InstanceIds", []))
                if errors:
                    answer["Errors"] = [*answer.get("Errors", []), *errors]
                return result
        return ActionResult(
            {"FleetId": f"fleet-{secrets.token_hex(8)}", "Instances": [], "Errors": errors}
        )

    EC2Response.create_capacity_reservation = create_capacity_reservation  # type: ignore[attr-defined]
    EC2Response.describe_capacity_reservations = describe_capacity_reservations  # type: ignore[attr-defined]
    EC2Response.cancel_capacity_reservation = cancel_capacity_reservation  # type: ignore[attr-defined]
    Fleets.create_fleet = create_fleet  # type: ignore[method-assign]
    _installed.set()
