"""Credentials must never reach what an operator ships elsewhere: logs, Kubernetes events, spans.

A `Witness` keeps everything the in-process daemon says while it runs: every log line, logged as
`karpy run --log-level debug` logs, and every span (name, attributes, events, status). With the
Events the daemon wrote, it is searched for the credentials the run used: the kubeconfig's
bearer token or client key, and the AWS keys.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import yaml
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from karpy.kube.events import REPORTING_CONTROLLER
from karpy.runtime.logging import WIRE_LOGGERS, configure

AWS_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def kube_secrets(kubeconfig: Path) -> dict[str, str]:
    """The credentials of every user in `kubeconfig`: bearer tokens, passwords, client keys (as
    written, and each line of the decoded PEM body)."""
    found: dict[str, str] = {}
    document = yaml.safe_load(kubeconfig.read_text())
    for entry in document.get("users") or []:
        user, name = entry.get("user") or {}, entry.get("name", "")
        for field in ("token", "password"):
            if user.get(field):
                found[f"kubeconfig {name} {field}"] = str(user[field])
        if user.get("client-key-data"):
            found[f"kubeconfig {name} client-key-data"] = str(user["client-key-data"])
            pem = base64.b64decode(user["client-key-data"]).decode()
            for number, line in enumerate(pem.splitlines()):
                if line and not line.startswith("-----"):
                    found[f"kubeconfig {name} client key line {number}"] = line
    return found


def aws_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The AWS credentials in `environ`."""
    return {key: environ[key] for key in AWS_SECRETS if environ.get(key)}


class Witness:
    """What the daemon said while the witness watched (see the module docstring)."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        """Pass to `running_daemon(span_exporter=...)`."""
        self._logs = io.StringIO()

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Log as `karpy run --log-level debug` logs (karpy.runtime.logging.configure), into
        the witness, for the block; then put the logging setup back as it was."""
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        wire = {name: logging.getLogger(name).level for name in WIRE_LOGGERS}
        configure("debug", stream=self._logs)
        try:
            yield
        finally:
            for handler in list(root.handlers):
                root.removeHandler(handler)
            for handler in handlers:
                root.addHandler(handler)
            root.setLevel(level)
            for name, was in wire.items():
                logging.getLogger(name).setLevel(was)

    def said(self, events: list[dict[str, Any]]) -> dict[str, list[str]]:
        """Everything said, by where: log lines, spans and `events` (as JSON)."""
        spans = [
            orjson.dumps(
                {
                    "name": span.name,
                    "attributes": dict(span.attributes or {}),
                    "events": [
                        {"name": e.name, "attributes": dict(e.attributes or {})}
                        for e in span.events
                    ],
                    "status": span.status.description,
                },
                default=str,
            ).decode()
            for span in self.spans.get_finished_spans()
        ]
        return {
            "log": self._logs.getvalue().splitlines(),
            "span": spans,
            "event": [orjson.dumps(e, default=str).decode() for e in events],
        }

    def leaks(self, secrets: Mapping[str, str], events: list[dict[str, Any]]) -> list[str]:
        """Each (where, which secret, the line) in which a secret appears; empty when none."""
        found = []
        for where, lines in self.said(events).items():
            for line in lines:
                found += [
                    f"{where}: {label}: {line[:300]}"
                    for label, value in secrets.items()
                    if value in line
                ]
        return found


async def karpy_events(api: Any) -> list[dict[str, Any]]:
    """Every Event karpy reported, in any namespace, as the apiserver stores it."""
    from kubernetes_asyncio import client

    listed = await client.CoreV1Api(api).list_event_for_all_namespaces()
    return [
        api.sanitize_for_serialization(e)
        for e in listed.items
        if e.reporting_component == REPORTING_CONTROLLER
        or (e.source is not None and e.source.component == REPORTING_CONTROLLER)
    ]


def assert_no_secrets(
    witness: Witness, secrets: Mapping[str, str], events: list[dict[str, Any]], known: str
) -> None:
    """No secret is in anything the daemon said; and the search is not blind: `known`, a name
    the run used (its NodePool's, say), is found in its logs, its spans and its events alike."""
    assert secrets, "no credentials to look for"
    leaks = witness.leaks(secrets, events)
    assert not leaks, "\n".join([f"{len(leaks)} leaks, the first:", *leaks[:20]])
    said = witness.said(events)
    blind = [where for where, lines in said.items() if not any(known in line for line in lines)]
    assert blind == [], f"{known!r} is in none of the {blind}: the search sees nothing there"
