"""The conversion webhook of `karpy run`: serves karpenter.sh/v1beta1 (and providers' older
NodeClass versions) beside v1 by answering the apiserver's ConversionReviews.

At start karpy makes a CA and a serving certificate, listens over TLS, and writes where it
listens (its Service, or a URL when it runs outside the cluster) and the CA bundle into every
CRD that serves an older version, as Karpenter v1.0 did. Behind a Service every replica must
present a certificate the one bundle trusts, so the first replica keeps the CA, certificate and
key in a Secret beside the Service and the others serve the same ones. The conversion itself is
pure (karpy.apis.conversion); this module is only the plumbing.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs

from karpy.apis.conversion import Convertible, review
from karpy.apis.crds import CONVERSION_PATH, CRDInfo
from karpy.apis.v1beta1.convert import NodeClassDefaults
from karpy.kube.client import KubeClient
from karpy.kube.errors import ConflictError, NotFoundError
from karpy.runtime.certs import ServingCertificate, self_signed
from karpy.runtime.clock import Clock
from karpy.runtime.webhook import WebhookServer

log = logging.getLogger(__name__)

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where the apiserver reaches the webhook: a Service in the cluster, or a URL."""

    url: str | None = None
    service_name: str | None = None
    service_namespace: str | None = None
    service_port: int = 443

    def hosts(self) -> list[str]:
        """The names the serving certificate must carry."""
        if self.url is not None:
            return [urlsplit(self.url).hostname or "localhost"]
        name, namespace = self.service_name, self.service_namespace
        return [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]

    def client_config(self, ca: bytes, *, port: int) -> dict[str, Any]:
        """The CRDs' clientConfig; a URL without a port gets the one karpy listens on."""
        bundle = base64.b64encode(ca).decode()
        if self.url is not None:
            parts = urlsplit(self.url)
            netloc = parts.netloc if parts.port is not None else f"{parts.netloc}:{port}"
            url = parts._replace(netloc=netloc, path=parts.path.rstrip("/") + CONVERSION_PATH)
            # A merge patch: null removes the placeholder Service the CRD was rendered with.
            return {"url": url.geturl(), "service": None, "caBundle": bundle}
        return {
            "service": {
                "name": self.service_name,
                "namespace": self.service_namespace,
                "port": self.service_port,
                "path": CONVERSION_PATH,
            },
            "url": None,
            "caBundle": bundle,
        }


def conversion_kinds(crds: Sequence[CRDInfo]) -> dict[tuple[str, str], Convertible]:
    """(group, kind) -> Convertible for every CRD serving an older version."""
    return {
        (c.model.GROUP, c.model.KIND): Convertible(storage=c.model, served=c.served)
        for c in crds
        if c.served
    }


def node_class_defaults(crds: Sequence[CRDInfo], *, group: str, kind: str) -> NodeClassDefaults:
    """The provider's NodeClass (group, kind), and for each NodeClass CRD the version a v1beta1
    reference names: its oldest served version (v1beta1 when served, else what it stores)."""
    versions = {
        (c.model.GROUP, c.model.KIND): (c.served[-1].model.VERSION if c.served else c.model.VERSION)
        for c in crds
    }
    return NodeClassDefaults(group=group, kind=kind, versions=versions)


class ConversionWebhook:
    """The TLS server answering ConversionReviews, and its registration in the CRDs."""

    def __init__(
        self,
        client: KubeClient,
        *,
        host: str,
        port: int,
        endpoint: Endpoint,
        crds: Sequence[CRDInfo],
        defaults: NodeClassDefaults,
        clock: Clock,
    ) -> None:
        self._client = client
        self._host = host
        self._port = port
        self._endpoint = endpoint
        self._crds = [c for c in crds if c.served]
        self._clock = clock
        self._kinds = conversion_kinds(crds)
        self._defaults = defaults
        self.server: WebhookServer | None = None

    async def start(self) -> None:
        """Listen, then point every CRD serving an older version at this webhook."""
        certificate = await self.certificate()
        kinds, defaults = self._kinds, self._defaults
        self.server = WebhookServer(
            host=self._host,
            port=self._port,
            context=certificate.server_context(),
            routes={CONVERSION_PATH: lambda request: _answer(request, kinds, defaults)},
        )
        await self.server.start()
        config = self._endpoint.client_config(certificate.ca, port=self.server.port)
        for crd in self._crds:
            name = f"{crd.model.PLURAL}.{crd.model.GROUP}"
            try:
                await self._client.request(
                    "PATCH",
                    f"{CRD_PATH}/{name}",
                    body={"spec": {"conversion": {"webhook": {"clientConfig": config}}}},
                    content_type="application/merge-patch+json",
                )
            except NotFoundError:
                # Another provider's CRD, not installed here: nothing can ask to convert it.
                log.info("conversion webhook: CRD not installed", extra={"crd": name})
                continue
            log.info("registered conversion webhook", extra={"crd": name})

    async def run(self) -> None:
        """Serve until cancelled (start() first)."""
        if self.server is None:
            await self.start()
        assert self.server is not None  # noqa: S101 - start() sets it
        await self.server.run()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    async def certificate(self) -> ServingCertificate:
        """A fresh certificate for a URL (one process); for a Service, the one in the shared
        Secret, made and stored by whichever replica comes first."""
        fresh = self_signed(self._endpoint.hosts(), now=self._clock.now())
        if self._endpoint.url is not None:
            return fresh
        path = (
            f"/api/v1/namespaces/{self._endpoint.service_namespace}/secrets/"
            f"{self._endpoint.service_name}-webhook-cert"
        )
        for _ in range(2):
            with contextlib.suppress(NotFoundError):
                return _from_secret(await self._client.request("GET", path))
            try:
                await self._client.request(
                    "POST", path.rsplit("/", 1)[0], body=_secret(path.rsplit("/", 1)[1], fresh)
                )
            except ConflictError:
                continue  # another replica stored its own first: serve that one
            log.info("stored the webhook certificate", extra={"secret": path})
            return fresh
        return _from_secret(await self._client.request("GET", path))


_KEYS = {"ca": "ca.crt", "cert": "tls.crt", "key": "tls.key"}


def _secret(name: str, certificate: ServingCertificate) -> dict[str, Any]:
    data = {_KEYS[field]: base64.b64encode(getattr(certificate, field)).decode() for field in _KEYS}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}


def _from_secret(secret: Mapping[str, Any]) -> ServingCertificate:
    data = secret.get("data") or {}
    try:
        return ServingCertificate(
            **{field: base64.b64decode(data[key]) for field, key in _KEYS.items()}
        )
    except (KeyError, ValueError) as error:
        name = (secret.get("metadata") or {}).get("name")
        msg = f"Secret {name}: no usable {', '.join(_KEYS.values())} ({error!r})"
        raise ValueError(msg) from error


def _answer(
    request: object, kinds: Mapping[tuple[str, str], Convertible], defaults: NodeClassDefaults
) -> object:
    if not isinstance(request, Mapping):
        return {"message": "expected a ConversionReview object"}
    return review(request, kinds=kinds, defaults=defaults)
