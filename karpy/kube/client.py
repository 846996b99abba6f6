"""KubeClient: typed, timeout-bounded access to the apiserver.

kubernetes_asyncio's generated API classes deserialise into SDK model objects, which are slow and
must not leak upward. KubeClient instead drives the SDK's ApiClient (its auth, TLS and kubeconfig
handling) with raw JSON parsed by orjson, and hands back typed values through each kind's decoder.
Every request sits inside `asyncio.timeout`, and every failure becomes a `karpy.kube.errors`
exception.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import aiohttp
import orjson
from kubernetes_asyncio import client as sdk
from kubernetes_asyncio import config as sdk_config

import karpy
from karpy.apis.meta import HasMetadata
from karpy.kube.errors import (
    ConflictError,
    FencedError,
    KubeConfigError,
    KubeError,
    UnreachableError,
    from_status,
)
from karpy.kube.patch import (
    MERGE_PATCH,
    encode_object,
    finalizer_patch,
    object_patch,
    status_patch,
    with_resource_version,
)
from karpy.kube.resources import Listed, ResourceKind, decode_item
from karpy.runtime.ratelimit import TokenBucket

CREATE_ATTEMPTS: Final = 4
CREATE_RETRY_DELAY: Final = 0.5
"""Seconds before a create whose answer was lost is sent again (times the attempt)."""
NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
"""The characters the apiserver draws a generateName suffix from (no vowels, no look-alikes)."""


def generated_name(prefix: str) -> str:
    """`prefix` and five characters, as the apiserver completes a generateName."""
    return prefix + "".join(secrets.choice(NAME_ALPHABET) for _ in range(5))


T = TypeVar("T")


M = TypeVar("M", bound=HasMetadata)

LIST_PAGE_SIZE: Final = 500
"""Objects per list page; the apiserver's own default chunk size for informers."""

USER_AGENT: Final = f"karpy/{karpy.__version__}"
"""How karpy names itself to the apiserver (audit logs, apiserver metrics)."""

Query = Sequence[tuple[str, str]]


class KubeClient:
    """One apiserver connection pool. Close it with `close()`.

    `sdk_client` is the underlying kubernetes_asyncio ApiClient, for use inside karpy.kube only.
    """

    def __init__(
        self, sdk_client: Any, *, request_timeout: float, limiter: TokenBucket | None = None
    ) -> None:
        self.sdk_client = sdk_client
        self.request_timeout = request_timeout
        self._limiter = limiter
        self._fence: Callable[[str, str], str | None] | None = None

    def fence(self, check: Callable[[str, str], str | None]) -> None:
        """Ask `check(method, path)` before every write (any method but GET); a reason it
        returns refuses the write with FencedError before it is sent. The leader elector fences
        a replica whose lease may have lapsed (karpy.kube.lease)."""
        self._fence = check

    @classmethod
    async def connect(
        cls,
        kubeconfig: Path | None,
        *,
        request_timeout: float,
        limiter: TokenBucket | None = None,
        user_agent: str = USER_AGENT,
    ) -> KubeClient:
        """Build a client from a kubeconfig file, or from the in-cluster service account if None.

        Every request (watches included) first takes a token from `limiter`, when one is given.
        `user_agent` names the caller in the apiserver's audit log and metrics: karpy's own by
        default; a tool built on this client (a test bed) names itself, so it is not counted as
        karpy.
        """
        configuration = sdk.Configuration()
        try:
            if kubeconfig is None:
                sdk_config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            else:
                if not await asyncio.to_thread(kubeconfig.is_file):
                    msg = f"kubeconfig {kubeconfig} does not exist or is not a file"
                    raise KubeConfigError(msg)
                await sdk_config.load_kube_config(
                    config_file=str(kubeconfig),
                    client_configuration=configuration,
                    persist_config=False,
                )
        except sdk_config.ConfigException as error:
            where = "in-cluster config" if kubeconfig is None else f"kubeconfig {kubeconfig}"
            msg = f"{where}: {error}"
            raise KubeConfigError(msg) from error
        api = sdk.ApiClient(configuration=configuration)
        # The apiserver's audit log and metrics tell karpy's requests apart by this, as
        # Karpenter's client identifies itself as "karpenter/<version>".
        api.user_agent = user_agent
        return cls(api, request_timeout=request_timeout, limiter=limiter)

    async def close(self) -> None:
        await self.sdk_client.close()

    async def get(self, kind: ResourceKind[T], name: str, *, namespace: str | None = None) -> T:
        """Read one object. Raises NotFoundError if absent, DecodeError if it does not decode."""
        raw = await self.request("GET", kind.object_path(name, namespace))
        return decode_item(kind, raw).obj

    async def list(
        self,
        kind: ResourceKind[T],
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
    ) -> Listed[T]:
        """A consistent list of every object of `kind` (paginated), decoded; only those matching
        `field_selector` (e.g. "spec.nodeName=n1") when one is given."""
        raws, version = await self.list_raw(
            kind, namespace=namespace, field_selector=field_selector
        )
        return Listed(items=tuple(decode_item(kind, raw) for raw in raws), resource_version=version)

    async def delete(
        self,
        kind: ResourceKind[Any],
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Delete one object, with `grace_period_seconds` in place of its own grace period
        when given (a pod's terminationGracePeriodSeconds). Raises NotFoundError if it is
        already gone."""
        body = (
            None
            if grace_period_seconds is None
            else {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": grace_period_seconds,
            }
        )
        await self.request("DELETE", kind.object_path(name, namespace), body=body)

    async def create(
        self, kind: ResourceKind[T], obj: object, *, namespace: str | None = None
    ) -> T:
        """Create `obj` (a karpy.apis model) and return the object as the apiserver stored it.

        Raises ConflictError when an object of that name already exists, KubeError (422) when the
        apiserver rejects it; the message names the object.
        """
        body = encode_object(kind, obj)
        return await self.create_raw(kind, body, namespace=namespace)

    async def create_once(
        self,
        kind: ResourceKind[T],
        obj: object,
        *,
        namespace: str | None = None,
        attempts: int = CREATE_ATTEMPTS,
    ) -> T:
        """Create `obj` once, even when the apiserver's answer is lost on the way back.

        A POST whose connection breaks after the apiserver stored the object (a reset
        connection, a load balancer's idle timeout) fails here although the object exists;
        created again under a fresh generateName it would exist twice (a second NodeClaim, a
        second instance). So an object named by generateName gets its name here, drawn as the
        apiserver draws one, and a create whose answer was lost is sent again under the same
        name: AlreadyExists then means the lost one was stored, and it is read back. A name
        taken before any answer was lost is another object's: a fresh one is drawn. Gives up
        (raising the last UnreachableError) after `attempts` tries.
        """
        body = dict(encode_object(kind, obj))
        metadata = dict(body.get("metadata") or {})
        prefix = metadata.get("generateName")
        if not metadata.get("name") and prefix:
            metadata["name"] = generated_name(prefix)
        body["metadata"] = metadata
        lost = False
        for attempt in range(attempts):
            try:
                return await self.create_raw(kind, body, namespace=namespace)
            except ConflictError:
                if lost:
                    return await self.get(kind, metadata["name"], namespace=namespace)
                if not prefix:
                    raise
                metadata["name"] = generated_name(prefix)
            except UnreachableError:
                if attempt == attempts - 1:
                    raise
                lost = True
                await asyncio.sleep(CREATE_RETRY_DELAY * (attempt + 1))
        msg = f"{kind.kind} {metadata.get('name')!r}: not created in {attempts} attempts"
        raise UnreachableError(msg)

    async def merge_patch(
        self,
        kind: ResourceKind[T],
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> T:
        """Apply a JSON merge patch (RFC 7386) to the object and return the result.

        With `resource_version` the write is optimistic: it raises ConflictError unless the object
        is still at that version. Lists are replaced whole by a merge patch, so patches that change
        a list (finalizers, taints, conditions) should pass the version they read it at.
        Raises NotFoundError when the object does not exist.
        """
        raw = await self.request(
            "PATCH",
            kind.object_path(name, namespace),
            body=with_resource_version(patch, resource_version),
            content_type=MERGE_PATCH,
        )
        return decode_item(kind, raw).obj

    async def patch(
        self,
        kind: ResourceKind[M],
        before: M,
        after: M,
        *,
        optimistic: bool = False,
        same_uid: bool = False,
    ) -> M:
        """Write the changes from `before` (the object as read) to `after` (it evolved) as one
        merge patch (`object_patch`, as controller-runtime's `client.MergeFrom`) and return the
        object as stored; `before` itself, with no request, when nothing differs.

        `optimistic` applies the patch only at `before`'s resourceVersion (ConflictError
        otherwise): needed when the change replaces a list (finalizers, taints). `same_uid`
        applies it only to the object of `before`'s uid, not to a newer one of the same name
        (ConflictError otherwise). Raises NotFoundError when the object does not exist.
        """
        body = object_patch(before, after)
        if not body:
            return before
        metadata = before.metadata
        if same_uid:
            body = {**body, "metadata": {**(body.get("metadata") or {}), "uid": metadata.uid}}
        return await self.merge_patch(
            kind,
            metadata.name or "",
            body,
            namespace=metadata.namespace,
            resource_version=metadata.resource_version if optimistic else None,
        )

    async def patch_status(
        self,
        kind: ResourceKind[T],
        name: str,
        status: object,
        *,
        previous: object | None = None,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> T:
        """Merge-patch the status subresource with `status` (a karpy.apis model) and return the
        object. Fields the model leaves unset (None) are left as they are on the server, unless
        `previous` (the status as read) had them: those are sent as null, so they are removed.
        Lists (conditions) are replaced whole. Optimistic with `resource_version`, as
        `merge_patch`.
        """
        raw = await self.request(
            "PATCH",
            kind.object_path(name, namespace) + "/status",
            body=with_resource_version(status_patch(previous, status), resource_version),
            content_type=MERGE_PATCH,
        )
        return decode_item(kind, raw).obj

    async def add_finalizer(self, kind: ResourceKind[M], obj: M, finalizer: str) -> M:
        """Ensure `finalizer` is on `obj` (as read); returns the object, `obj` itself when the
        finalizer is already there.

        Side effect: one merge patch at `obj`'s resourceVersion when the finalizer is missing.
        Raises ConflictError when the object changed since it was read (requeue), NotFoundError
        when it is gone.
        """
        return await self._edit_finalizer(kind, obj, finalizer, present=True)

    async def remove_finalizer(self, kind: ResourceKind[M], obj: M, finalizer: str) -> M:
        """Ensure `finalizer` is not on `obj` (as read); returns the object as written, `obj`
        itself when the finalizer was not there.

        Removing the last finalizer of an object being deleted lets the apiserver delete it; the
        returned object then still shows the deletion timestamp. Raises ConflictError when the
        object changed since it was read, NotFoundError when it is gone.
        """
        return await self._edit_finalizer(kind, obj, finalizer, present=False)

    async def _edit_finalizer(
        self, kind: ResourceKind[M], obj: M, finalizer: str, *, present: bool
    ) -> M:
        metadata = obj.metadata
        edit = finalizer_patch(metadata, finalizer, present=present)
        if not edit:
            return obj
        return await self.merge_patch(
            kind,
            metadata.name or "",
            {"metadata": edit},
            namespace=metadata.namespace,
            resource_version=metadata.resource_version,
        )

    async def evict(self, name: str, *, namespace: str) -> None:
        """Ask the Eviction API (policy/v1) to evict pod `namespace`/`name`.

        Raises TooManyRequestsError (429) when a PodDisruptionBudget does not allow it now: retry
        later, never delete around it. NotFoundError when the pod is gone.
        """
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        await self.request("POST", path, body=body)

    # ------------------------------------------------------------ raw access, karpy.kube only

    async def create_raw(
        self, kind: ResourceKind[T], body: Mapping[str, Any], *, namespace: str | None = None
    ) -> T:
        """POST one object's JSON to its collection and decode the stored object."""
        if kind.namespaced and not namespace:
            name = (body.get("metadata") or {}).get("name", "")
            msg = f"{kind.kind} {name!r}: a namespace is required for a namespaced kind"
            raise ValueError(msg)
        raw = await self.request("POST", kind.collection_path(namespace), body=body)
        return decode_item(kind, raw).obj

    async def list_raw(
        self,
        kind: ResourceKind[Any],
        *,
        namespace: str | None = None,
        page_size: int = LIST_PAGE_SIZE,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[Mapping[str, Any]], str]:
        """Every object's JSON and the list's resourceVersion, following `continue` tokens."""
        items: builtins.list[Mapping[str, Any]] = []
        token = ""
        while True:
            query: builtins.list[tuple[str, str]] = [("limit", str(page_size))]
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            page = await self.request("GET", kind.collection_path(namespace), query=query)
            raw_items = page.get("items") or []
            for raw in raw_items:
                # Items of a list omit kind/apiVersion; restore them so decoders see whole objects.
                items.append({"kind": kind.kind, "apiVersion": kind.api_version, **raw})
            metadata = page.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token:
                return items, str(metadata.get("resourceVersion", ""))

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Mapping[str, Any]:
        """One JSON request; returns the parsed body. Raises a KubeError subclass on failure."""
        # The SDK's REST layer reads Content-Type for every write (DELETE included) and serialises
        # JSON bodies itself, so the body goes down as a plain dict.
        headers = {"Accept": "application/json", "Content-Type": content_type}
        data = dict(body) if body is not None else None
        if self._limiter is not None:
            await self._limiter.acquire()
        # After the limiter's wait, not before: a write that waited there through a stop must
        # be judged by the lease as it is when the write goes out.
        if method != "GET" and self._fence is not None:
            why = self._fence(method, path)
            if why is not None:
                raise FencedError(f"{method} {path}: {why}")
        try:
            async with asyncio.timeout(self.request_timeout):
                response = await self._send(method, path, query=query, headers=headers, body=data)
                try:
                    payload = await response.read()
                finally:
                    response.release()
        except TimeoutError as error:
            msg = f"{method} {path}: no answer within {self.request_timeout}s"
            raise UnreachableError(msg) from error
        except (aiohttp.ClientError, OSError) as error:
            # The connection broke while the body was being read.
            msg = f"{method} {path}: {error!r}"
            raise UnreachableError(msg) from error
        if not 200 <= response.status <= 299:
            raise from_status(
                response.status,
                payload,
                headers=dict(response.headers),
                reason=response.reason or "",
            )
        parsed = orjson.loads(payload) if payload else {}
        if not isinstance(parsed, dict):
            raise KubeError(response.status, "BadResponse", f"{method} {path}: not a JSON object")
        return parsed

    @contextlib.asynccontextmanager
    async def open_watch(
        self,
        kind: ResourceKind[Any],
        *,
        resource_version: str,
        timeout_seconds: int,
        namespace: str | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Open a watch stream (bookmarks on) from `resource_version`; yields the open response.

        A non-2xx answer raises the matching KubeError (e.g. GoneError for a too-old version).
        """
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if self._limiter is not None:
            await self._limiter.acquire()
        try:
            async with asyncio.timeout(self.request_timeout):
                response = await self._send(
                    "GET",
                    kind.collection_path(namespace),
                    query=query,
                    headers={"Accept": "application/json"},
                    body=None,
                    streaming=True,
                )
        except TimeoutError as error:
            msg = f"watch {kind.plural}: no answer within {self.request_timeout}s"
            raise UnreachableError(msg) from error
        try:
            if not 200 <= response.status <= 299:
                try:
                    async with asyncio.timeout(self.request_timeout):
                        payload = await response.read()
                except (TimeoutError, aiohttp.ClientError, OSError) as error:
                    msg = f"watch {kind.plural}: HTTP {response.status}, body unreadable: {error!r}"
                    raise UnreachableError(msg) from error
                raise from_status(response.status, payload, reason=response.reason or "")
            yield response
        finally:
            response.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query,
        headers: dict[str, str],
        body: dict[str, Any] | None,
        streaming: bool = False,
    ) -> aiohttp.ClientResponse:
        # Streams are bounded by the watch's own inactivity timeout, not a total request timeout.
        timeout = aiohttp.ClientTimeout(
            total=None if streaming else self.request_timeout,
            connect=self.request_timeout,
            sock_read=None if streaming else self.request_timeout,
        )
        try:
            response: aiohttp.ClientResponse = await self.sdk_client.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (aiohttp.ClientError, OSError) as error:
            msg = f"{method} {path}: {error!r}"
            raise UnreachableError(msg) from error
        return response
