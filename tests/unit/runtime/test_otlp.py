"""With an OTLP endpoint set, spans and metrics are pushed over OTLP/HTTP (to a loopback sink)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from karpy.runtime.telemetry import Telemetry


class Sink(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, int]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        Sink.received.append((self.path, self.headers.get("Content-Type", ""), len(body)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def sink() -> Iterator[str]:
    Sink.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_spans_and_metrics_reach_the_otlp_endpoint(sink: str) -> None:
    telemetry = Telemetry.setup(service_name="karpy-test", otlp_endpoint=sink)
    with telemetry.tracer.start_as_current_span("reconcile test"):
        telemetry.metrics.reconcile_total.add(1, {"controller": "test", "result": "success"})
    telemetry.shutdown()  # flushes the batch span processor and the periodic metric reader
    paths = {path for path, _, _ in Sink.received}
    assert {"/v1/traces", "/v1/metrics"} <= paths
    assert all(content_type == "application/x-protobuf" for _, content_type, _ in Sink.received)
    assert all(size > 0 for _, _, size in Sink.received)
