"""Instance profiles for EC2NodeClasses that name a ``role``: created, tagged and cached.

Nodes get their IAM identity from an instance profile. A NodeClass may name one it manages
itself (``instanceProfile``) or just the node ``role``, in which case karpy owns a profile for
it: named ``<cluster>_<hash of region, NodeClass and role>`` so a changed role gets a new
profile instead of swapping the role under running nodes, tagged so the controller's IAM policy
lets it manage only its own, and cached for 15 minutes on the injected clock so a reconcile does
not call IAM every time. A profile karpy made and no longer uses (its NodeClass's role
changed, or the NodeClass went without its finalizer) is found by its name and tags
(``list_managed``) for garbage collection.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
from typing import Final

import attrs

from karpy.apis.v1 import labels as wk
from karpy.runtime.clock import Clock
from karpy_aws.apis import labels as awslabels
from karpy_aws.errors import AlreadyExistsError, ConfigurationError, NotFoundError
from karpy_aws.providers.launchtemplate import TAG_CLUSTER_PREFIX, TAG_EKS_CLUSTER_NAME
from karpy_aws.session import AWSClient

INSTANCE_PROFILE_CACHE_TTL: Final = datetime.timedelta(minutes=15)
INSTANCE_PROFILE_PATH: Final = "/"


def profile_name(*, cluster_name: str, region: str, nodeclass: str, role: str) -> str:
    """``<cluster>_<digest>``: stable for one (region, NodeClass, role), new when any changes."""
    digest = hashlib.sha256(f"{region}/{nodeclass}/{role}".encode()).hexdigest()[:16]
    return f"{cluster_name}_{digest}"[:128]


def role_name(role: str) -> str:
    """The role's name from a name, ``path/name`` or ARN (AddRoleToInstanceProfile wants it)."""
    name = role.rsplit("/", 1)[-1]
    if not name:
        raise ConfigurationError(f"spec.role: {role!r} does not name a role")
    return name


class InstanceProfiles:
    """Find-or-create instance profiles; one per event loop."""

    def __init__(
        self,
        iam: AWSClient,
        clock: Clock,
        *,
        cluster_name: str,
        region: str,
        ttl: datetime.timedelta = INSTANCE_PROFILE_CACHE_TTL,
    ) -> None:
        self._iam = iam
        self._clock = clock
        self._cluster_name = cluster_name
        self._region = region
        self._ttl = ttl
        self._cache: dict[str, datetime.datetime] = {}

    def _tags(self, nodeclass: str) -> list[dict[str, str]]:
        tags = {
            f"{TAG_CLUSTER_PREFIX}{self._cluster_name}": "owned",
            TAG_EKS_CLUSTER_NAME: self._cluster_name,
            wk.LABEL_TOPOLOGY_REGION: self._region,
            awslabels.LABEL_AWS_EC2NODECLASS: nodeclass,
        }
        return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]

    async def ensure_for_role(self, *, nodeclass: str, role: str) -> str:
        """The name of the profile karpy manages for ``role``, created and given the role if
        needed. Raises ConfigurationError for an unusable role name, karpy_aws.errors.AWSError
        if IAM fails (e.g. NotFoundError when the role does not exist)."""
        role = role_name(role)
        name = profile_name(
            cluster_name=self._cluster_name, region=self._region, nodeclass=nodeclass, role=role
        )
        now = self._clock.now()
        if now < self._cache.get(name, now):
            return name
        roles = await self._roles(name)
        if roles is None:
            # Another reconcile may win the race; the role check below applies either way.
            with contextlib.suppress(AlreadyExistsError):
                await self._iam.call(
                    "CreateInstanceProfile",
                    InstanceProfileName=name,
                    Path=INSTANCE_PROFILE_PATH,
                    Tags=self._tags(nodeclass),
                )
            roles = await self._roles(name) or []
        if role not in roles:
            for other in roles:
                await self._iam.call(
                    "RemoveRoleFromInstanceProfile", InstanceProfileName=name, RoleName=other
                )
            await self._iam.call(
                "AddRoleToInstanceProfile", InstanceProfileName=name, RoleName=role
            )
        self._cache[name] = now + self._ttl
        return name

    async def delete_for_role(self, *, nodeclass: str, role: str) -> bool:
        """Delete the profile karpy manages for ``role`` (its NodeClass is going away and has
        no nodes left): remove its roles, then the profile. Return False if it was already
        gone."""
        name = profile_name(
            cluster_name=self._cluster_name,
            region=self._region,
            nodeclass=nodeclass,
            role=role_name(role),
        )
        self._cache.pop(name, None)
        roles = await self._roles(name)
        if roles is None:
            return False
        try:
            for other in roles:
                await self._iam.call(
                    "RemoveRoleFromInstanceProfile", InstanceProfileName=name, RoleName=other
                )
            await self._iam.call("DeleteInstanceProfile", InstanceProfileName=name)
        except NotFoundError:
            return False
        return True

    async def exists(self, name: str) -> bool:
        """Does the (user-managed) profile ``name`` exist? Cached like managed ones."""
        now = self._clock.now()
        if now < self._cache.get(name, now):
            return True
        if await self._roles(name) is None:
            return False
        self._cache[name] = now + self._ttl
        return True

    async def _roles(self, name: str) -> list[str] | None:
        try:
            response = await self._iam.call("GetInstanceProfile", InstanceProfileName=name)
        except NotFoundError:
            return None
        return [r["RoleName"] for r in response["InstanceProfile"].get("Roles", [])]


@attrs.frozen(kw_only=True)
class ManagedProfile:
    """An instance profile karpy made for this cluster (and region), as IAM lists it."""

    name: str
    created: datetime.datetime
    nodeclass: str


async def list_managed(
    iam: AWSClient, *, cluster_name: str, region: str
) -> tuple[ManagedProfile, ...]:
    """The profiles karpy created for ``cluster_name`` in ``region``: named ``<cluster>_...``
    and tagged as owned by the cluster, in the region (IAM is global, so a cluster of the same
    name elsewhere has its own)."""
    rows = await iam.paginate(
        "ListInstanceProfiles", result_key="InstanceProfiles", PathPrefix=INSTANCE_PROFILE_PATH
    )
    found = []
    for row in rows:
        name = str(row["InstanceProfileName"])
        if not name.startswith(f"{cluster_name}_"):
            continue
        try:
            full = (await iam.call("GetInstanceProfile", InstanceProfileName=name))[
                "InstanceProfile"
            ]
        except NotFoundError:
            continue
        tags = {t["Key"]: t["Value"] for t in full.get("Tags", [])}
        owned = tags.get(f"{TAG_CLUSTER_PREFIX}{cluster_name}") == "owned"
        if not owned or tags.get(wk.LABEL_TOPOLOGY_REGION) != region:
            continue
        created = full.get("CreateDate")
        if not isinstance(created, datetime.datetime):
            created = datetime.datetime.fromisoformat(str(created))
        if created.tzinfo is None:
            created = created.replace(tzinfo=datetime.UTC)
        found.append(
            ManagedProfile(
                name=name,
                created=created,
                nodeclass=tags.get(awslabels.LABEL_AWS_EC2NODECLASS, ""),
            )
        )
    return tuple(sorted(found, key=lambda p: p.name))


async def delete_profile(iam: AWSClient, name: str) -> bool:
    """Remove the profile's roles, then the profile; False if it was already gone."""
    try:
        response = await iam.call("GetInstanceProfile", InstanceProfileName=name)
        for role in response["InstanceProfile"].get("Roles", []):
            await iam.call(
                "RemoveRoleFromInstanceProfile", InstanceProfileName=name, RoleName=role["RoleName"]
            )
        await iam.call("DeleteInstanceProfile", InstanceProfileName=name)
    except NotFoundError:
        return False
    return True
