"""Selector terms as karpy_aws receives them: narrow frozen values, validated on construction.

EC2NodeClass selects subnets, security groups and AMIs by *terms*: the terms are ORed, the fields
inside one term are ANDed, and a tag value of ``"*"`` means "any value". The discovery modules
need only these few fields, so they take these values rather than the whole NodeClass model; the
NodeClass controller converts its spec into them. Bad combinations fail here, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from karpy_aws.errors import ConfigurationError

MAX_SELECTOR_TERMS: Final = 30
TAG_WILDCARD: Final = "*"

Tags = tuple[tuple[str, str], ...]


def freeze_tags(value: Mapping[str, str] | Tags | None) -> Tags:
    if value is None:
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), str(v)) for k, v in items))


@attrs.frozen(kw_only=True)
class SelectorTerm:
    """One subnet or security-group selector term: ``tags``, or ``id`` alone, or (security
    groups only) ``name`` alone."""

    tags: Tags = attrs.field(default=(), converter=freeze_tags)
    id: str | None = None
    name: str | None = None

    def validate(self, field: str, *, allow_name: bool) -> None:
        """Raise ConfigurationError naming ``field`` if this term cannot be used."""
        if self.id is None and self.name is None and not self.tags:
            raise ConfigurationError(
                f"{field}: a term must set tags, id or name; got an empty term"
            )
        if self.id is not None and (self.tags or self.name is not None):
            raise ConfigurationError(
                f"{field}: 'id' cannot be combined with other fields in one term (id={self.id!r})"
            )
        if self.name is not None and not allow_name:
            raise ConfigurationError(f"{field}: 'name' is not a valid field here")
        if self.name is not None and self.tags:
            raise ConfigurationError(
                f"{field}: 'name' cannot be combined with other fields in one term "
                f"(name={self.name!r})"
            )
        for key, value in self.tags:
            if not key or not value:
                raise ConfigurationError(
                    f"{field}: tag keys and values must not be empty (got {key!r}={value!r})"
                )


def validate_terms(
    terms: tuple[SelectorTerm, ...] | list[SelectorTerm], field: str, *, allow_name: bool
) -> None:
    """Check the whole list: 1..30 terms, each valid."""
    if not terms:
        raise ConfigurationError(f"{field}: at least one selector term is required")
    if len(terms) > MAX_SELECTOR_TERMS:
        raise ConfigurationError(
            f"{field}: at most {MAX_SELECTOR_TERMS} terms are allowed, got {len(terms)}"
        )
    for index, term in enumerate(terms):
        term.validate(f"{field}[{index}]", allow_name=allow_name)


def tag_filters(tags: Tags) -> list[dict[str, object]]:
    """EC2 ``Filters`` for a term's tags: ``"*"`` becomes a tag-key filter (pure)."""
    filters: list[dict[str, object]] = []
    for key, value in tags:
        if value == TAG_WILDCARD:
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [value]})
    return filters
