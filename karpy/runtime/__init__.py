"""The asyncio kit every loop in karpy stands on.

It exists so that controllers share one vocabulary for time, backoff, channels, work queues, logs
and telemetry instead of each inventing its own. It knows nothing about Kubernetes: only the
standard library, attrs, orjson and OpenTelemetry.
"""
