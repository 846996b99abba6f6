"""A path-tracking reader over parsed YAML/JSON, so every error names the field it is about.

Scenario files are hand-written; a message like ``pods[3].requests.cpu: "abc" is not a valid
Kubernetes quantity`` is what lets a person fix one quickly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TypeVar

T = TypeVar("T")


class ScenarioError(ValueError):
    """A scenario file is malformed; the message starts with the field path."""


class Node:
    """One value in the document and the path that leads to it."""

    def __init__(self, value: object, path: str) -> None:
        self.value = value
        self.path = path or "(root)"

    def fail(self, message: str) -> ScenarioError:
        """An error about this field."""
        return ScenarioError(f"{self.path}: {message}")

    def _child_path(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return key if self.path == "(root)" else f"{self.path}.{key}"

    def mapping(self) -> dict[str, object]:
        """The value as a mapping (error otherwise)."""
        if not isinstance(self.value, dict):
            raise self.fail(f"expected a mapping, got {type(self.value).__name__}")
        return self.value

    def check_keys(self, allowed: set[str]) -> None:
        """Reject unknown keys (typos should not pass silently)."""
        unknown = sorted(set(self.mapping()) - allowed)
        if unknown:
            raise self.fail(
                f"unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
            )

    def get(self, key: str) -> Node | None:
        """A child field, or None when absent (or null)."""
        found = self.mapping().get(key)
        return None if found is None else Node(found, self._child_path(key))

    def req(self, key: str) -> Node:
        """A required child field."""
        found = self.get(key)
        if found is None:
            raise Node(None, self._child_path(key)).fail("is required")
        return found

    def items(self) -> Iterator[Node]:
        """Elements of a list field."""
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {type(self.value).__name__}")
        return (Node(v, self._child_path(i)) for i, v in enumerate(self.value))

    def entries(self) -> Iterator[tuple[str, Node]]:
        """Key/value pairs of a mapping field, keys sorted."""
        data = self.mapping()
        for key in sorted(data):
            if not isinstance(key, str):
                raise self.fail(f"keys must be strings, got {key!r}")
            yield key, Node(data[key], self._child_path(key))

    def text(self) -> str:
        """The value as a string (numbers are accepted and rendered)."""
        if isinstance(self.value, bool) or not isinstance(self.value, str | int | float):
            raise self.fail(f"expected a string, got {type(self.value).__name__}")
        return str(self.value)

    def integer(self) -> int:
        """The value as an integer."""
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.fail(f"expected an integer, got {self.value!r}")
        return self.value

    def number(self) -> float:
        """The value as a number."""
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self.fail(f"expected a number, got {self.value!r}")
        return float(self.value)

    def boolean(self) -> bool:
        """The value as a boolean."""
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, got {self.value!r}")
        return self.value

    def time(self) -> datetime:
        """The value as an RFC 3339 time with a zone offset ("2030-01-01T00:00:00Z"), in UTC."""
        value = self.value
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise self.fail(f"{self.value!r} is not an RFC 3339 time") from None
        if not isinstance(value, datetime):
            raise self.fail(f"expected an RFC 3339 time, got {self.value!r}")
        if value.tzinfo is None:
            raise self.fail(f"{self.value!r} has no zone offset (write e.g. ...T00:00:00Z)")
        return value.astimezone(UTC)

    def string_map(self) -> dict[str, str]:
        """A mapping of strings to strings (label maps)."""
        return {k: v.text() for k, v in self.entries()}

    def convert(self, fn: Callable[[Node], T]) -> T:
        """Apply ``fn``, re-raising plain ValueErrors as errors about this field."""
        try:
            return fn(self)
        except ScenarioError:
            raise
        except ValueError as err:
            raise self.fail(str(err)) from err
