"""Hypothesis strategies that build any karpy API model from its type annotations.

Every attrs class is generated field by field from its resolved types, so a new field is
covered by the round-trip property without anyone writing a strategy for it.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NewType, Union, get_args, get_origin

import attrs
from hypothesis import strategies as st

from karpy.apis.meta import IntOrString, Quantity

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)  # utf-8: no surrogates
_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=12)
_QUANTITY = st.from_regex(r"\A[1-9][0-9]{0,4}(m|Ki|Mi|Gi)?\Z")
_TIMES = st.datetimes(
    min_value=datetime(1971, 1, 1),  # noqa: DTZ001 - bounds for the naive values tz is added to
    max_value=datetime(2200, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)


def for_type(tp: Any) -> st.SearchStrategy[Any]:
    """A strategy for any type used in karpy.apis models."""
    origin = get_origin(tp)
    if tp == IntOrString:
        return st.one_of(st.integers(0, 10_000), _TEXT)
    if origin in (Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else for_type(a) for a in get_args(tp)))
    if tp is Quantity:
        return _QUANTITY
    if isinstance(tp, NewType):
        return for_type(tp.__supertype__)
    if tp is str:
        return _TEXT
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-(2**53), 2**53)
    if tp is datetime:
        return _TIMES
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if origin is tuple:
        return st.lists(for_type(get_args(tp)[0]), max_size=2).map(tuple)
    if origin is not None and issubclass(origin, Mapping):
        return st.dictionaries(_KEYS, for_type(get_args(tp)[1]), max_size=2)
    if isinstance(tp, type) and attrs.has(tp):
        return models(tp)
    msg = f"no strategy for {tp!r}"
    raise TypeError(msg)


_MODELS: dict[type[Any], st.SearchStrategy[Any]] = {}


def models(cls: type[Any]) -> st.SearchStrategy[Any]:
    """Instances of an attrs model (cached); the models have no recursive types."""
    if cls not in _MODELS:
        attrs.resolve_types(cls)
        fields = {a.name: for_type(a.type) for a in attrs.fields(cls)}
        _MODELS[cls] = st.builds(cls, **fields)
    return _MODELS[cls]
