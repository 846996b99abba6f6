"""Helpers shared by the API tests on the real control plane."""

from __future__ import annotations

from typing import Any


def is_subset(small: Any, big: Any) -> bool:
    """Whether every key and item of `small` appears, equal, in `big` (lists match by index)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and is_subset(v, big[k]) for k, v in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(small) == len(big)
            and all(is_subset(s, b) for s, b in zip(small, big, strict=True))
        )
    return bool(small == big)
