"""Reading a Telemetry's /metrics text in tests: one series' value, or a metric's total over the
series that carry some labels."""

from __future__ import annotations

from karpy.runtime.telemetry import Telemetry


def sample(telemetry: Telemetry, series: str) -> float:
    """The value of one series (its name with any labels, as exposed); 0 when it is absent."""
    for line in telemetry.prometheus_text().splitlines():
        if line.startswith(f"{series} "):
            return float(line.split()[-1])
    return 0.0


def total(telemetry: Telemetry, name: str, **labels: str) -> float:
    """The sum of `name`'s series that carry `labels`, whatever their other labels."""
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    found = 0.0
    for line in telemetry.prometheus_text().splitlines():
        series = line.rsplit(" ", 1)[0]
        if series.startswith(f"{name}{{") and all(w in series for w in wanted):
            found += float(line.split()[-1])
    return found
