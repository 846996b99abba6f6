"""A tiny synchronous Kubernetes REST client for session fixtures and clean-up.

Fixtures that run outside any event loop (session set-up, per-test clean-up) need a handful of
plain requests; this speaks to the local apiserver over urllib with the admin token so that
those paths never depend on the code under test.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from karpy.localcluster import ClusterInfo


class KubeHTTPError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status


class KubeHTTP:
    def __init__(self, info: ClusterInfo) -> None:
        if not info.server.startswith("https://127.0.0.1:"):
            raise ValueError(f"refusing a non-loopback apiserver: {info.server}")
        self._server = info.server
        self._token = info.token
        self._context = ssl.create_default_context(cafile=str(info.ca_file))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - loopback apiserver only
            self._server + path, data=data, method=method
        )
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self._context, timeout=30) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise KubeHTTPError(error.code, error.read().decode(errors="replace")) from error
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except KubeHTTPError as error:
            if error.status == 404:
                return False
            raise
        return True

    def delete(self, path: str) -> None:
        try:
            self.request("DELETE", path, {"propagationPolicy": "Background"})
        except KubeHTTPError as error:
            if error.status != 404:
                raise

    def force_delete(self, path: str) -> None:
        """Delete ``path`` with its finalizers stripped first: nothing is left waiting for a
        controller that no longer runs. Gone already is fine."""
        try:
            self.merge_patch(path, {"metadata": {"finalizers": None}})
        except KubeHTTPError as error:
            if error.status == 404:
                return
            raise
        self.delete(path)

    def events_about(
        self, uid: str, namespace: str = "default", *, component: str | None = None
    ) -> list[tuple[str, str]]:
        """(type, reason) of every core/v1 Event in ``namespace`` about the object with ``uid``;
        only those ``component`` reported, when given."""
        items = self.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        return [
            (e["type"], e["reason"])
            for e in items
            if e["involvedObject"].get("uid") == uid
            and (component is None or e.get("reportingComponent") == component)
        ]

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def apply(self, path: str, body: Any, *, field_manager: str = "karpy-tests") -> Any:
        """Server-side apply, forced: idempotent create-or-update."""
        return self.request(
            "PATCH",
            f"{path}?fieldManager={field_manager}&force=true",
            body,
            content_type="application/apply-patch+yaml",
        )
