"""Jaeger all-in-one (built from Go modules by karpy.localcluster.build.ensure_jaeger and
cached) on 127.0.0.1: an OTLP/HTTP receiver and the query API on free ports, traces in memory.

Built from Go modules, the binary has no UI assets (Jaeger's UI is built with npm): its UI
shows a placeholder, and the query API (/api/traces, /api/services) is what tests and users
read. Jaeger 2 is an OpenTelemetry Collector; the config below is its all-in-one pipeline (OTLP in,
in-memory storage, query API) with every listener on loopback and the collector's own metrics
and traces off, so several can run side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from karpy.localcluster import ensure_jaeger
from karpy.localcluster.process import free_port
from tests.support.processes import stop

CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: warn
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    grpc:
      endpoint: 127.0.0.1:{grpc}
    http:
      endpoint: 127.0.0.1:{http}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


@attrs.frozen
class Jaeger:
    """A running Jaeger: where to send OTLP/HTTP and where its query API answers."""

    otlp_endpoint: str
    query_url: str
    log: Path

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """GET `path` of the query API (JSON); raises OSError while Jaeger is not up."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.query_url}{path}{query}"
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback only
            return json.loads(response.read())

    def traces(self, service: str, **params: str) -> list[dict[str, Any]]:
        """Traces of `service` (Jaeger's /api/traces; `params` add operation, tags, limit...)."""
        found: list[dict[str, Any]] = self.get(
            "/api/traces", {"service": service, "limit": "1000", "lookback": "1h", **params}
        )["data"]
        return found

    def up(self) -> bool:
        try:
            self.get("/api/services")
        except (OSError, urllib.error.URLError):
            return False
        return True


@contextmanager
def jaeger(directory: Path) -> Iterator[Jaeger]:
    """Jaeger all-in-one until the block ends; the caller waits for `up()`."""
    binary = ensure_jaeger()
    otlp, grpc, http = free_port(), free_port(), free_port()
    config = directory / "jaeger.yaml"
    config.write_text(CONFIG.format(otlp=otlp, grpc=grpc, http=http))
    log_path = directory / "jaeger.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(binary), "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_environment(),
        )
        try:
            yield Jaeger(
                otlp_endpoint=f"http://127.0.0.1:{otlp}",
                query_url=f"http://127.0.0.1:{http}",
                log=log_path,
            )
        finally:
            stop(process)


def _environment() -> dict[str, str]:
    """The test's environment without its OpenTelemetry settings (meant for karpy), and with
    Jaeger's own tracing of its queries off: it would otherwise export to 127.0.0.1:4317."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**kept, "OTEL_TRACES_SAMPLER": "always_off"}


def tags(span: Mapping[str, Any]) -> dict[str, Any]:
    """A Jaeger span's tags as a dict (array attributes arrive as JSON text)."""
    return {t["key"]: t["value"] for t in span.get("tags", [])}


def references(span: Mapping[str, Any], kind: str) -> Sequence[tuple[str, str]]:
    """(traceID, spanID) of a span's references of `kind` (CHILD_OF for the parent,
    FOLLOWS_FROM for span links)."""
    return [(r["traceID"], r["spanID"]) for r in span.get("references", []) if r["refType"] == kind]
