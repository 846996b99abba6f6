"""How an option is declared: once, on the attrs field it fills.

A field made with `option(...)` carries its environment variable, its flag, its default, its
parser and its help in the field's metadata. The `karpy run` parser, the loader and
docs/settings.md are all derived by walking the declared classes, so adding an option is adding
one field, and no list of options can fall out of step with another.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs
from attrs import AttrsInstance

T = TypeVar("T")
A = TypeVar("A", bound=AttrsInstance)

_SETTINGS: Final = "karpy.options.settings"
_BUILD: Final = "karpy.options.build"
_GROUP: Final = "karpy.options.group"


class OptionsError(ValueError):
    """A flag or environment variable has a value karpy cannot use; the message names it."""


@attrs.frozen
class Setting:
    """One way to set a field: a variable (Karpenter's name where it has one) and a flag."""

    env: str
    flag: str
    parse: Callable[[str], Any]
    """Text to value; raises ValueError saying what is wrong (the loader adds the name)."""
    help: str
    switch: bool = False
    """A flag that takes no value (`--dry-run`); its variable still takes true or false."""
    part: str = ""
    """For a field filled from several settings, this one's key in the field's `build`."""

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


def option(
    env: str, flag: str, default: T, parse: Callable[[str], T], help: str, *, switch: bool = False
) -> T:
    """A field set by `env` or `flag` (a flag overrides its variable, which overrides `default`)."""
    setting = Setting(env, flag, parse, help, switch=switch)
    return attrs.field(default=default, metadata={_SETTINGS: (setting,)})


def composite(default: T, build: Callable[[T, Mapping[str, Any]], T], **parts: Setting) -> T:
    """A field filled from several settings: `build(default, {part: value})` over those given."""
    settings = tuple(attrs.evolve(setting, part=part) for part, setting in parts.items())
    return attrs.field(default=default, metadata={_SETTINGS: settings, _BUILD: build})


def group(cls: type[A]) -> A:
    """A field holding a class of options (`Options.batching`), whose fields declare its own."""
    return attrs.field(factory=cls, metadata={_GROUP: cls})


def _settings(field: attrs.Attribute[Any]) -> tuple[Setting, ...] | None:
    settings: tuple[Setting, ...] | None = field.metadata.get(_SETTINGS)
    return settings


def declared(cls: type[AttrsInstance]) -> tuple[Setting, ...]:
    """Every setting of `cls` and of its groups, in declaration order."""
    found: list[Setting] = []
    for field in attrs.fields(cls):
        settings = _settings(field)
        if settings is not None:
            found.extend(settings)
        elif _GROUP in field.metadata:
            found.extend(declared(field.metadata[_GROUP]))
    return tuple(found)


def add_arguments(parser: argparse.ArgumentParser, settings: Sequence[Setting]) -> None:
    """One flag per setting, its help naming the variable too."""
    for setting in settings:
        text = argparse_text(f"{setting.help} [env {setting.env}]")
        if setting.switch:
            parser.add_argument(setting.flag, dest=setting.dest, action="store_const",
                                const="true", default=None, help=text)  # fmt: skip
        else:
            parser.add_argument(setting.flag, dest=setting.dest, default=None, help=text)


def argparse_text(text: str) -> str:
    """`text` as argparse shows it: argparse %-formats help (for `%(default)s`), so a literal %
    must reach it doubled."""
    return text.replace("%", "%%")


def given(
    settings: Sequence[Setting], namespace: argparse.Namespace, environ: Mapping[str, str]
) -> dict[str, object]:
    """The parsed value of every setting given by flag or variable, by variable name.

    Raises OptionsError naming the flag or variable whose text its parser refuses."""
    values: dict[str, object] = {}
    for setting in settings:
        source, text = setting.flag, getattr(namespace, setting.dest)
        if text is None:
            source, text = setting.env, environ.get(setting.env)
        if text is None:
            continue
        try:
            values[setting.env] = setting.parse(text)
        except ValueError as error:
            msg = f"{source}: {error}"
            raise OptionsError(msg) from error
    return values


def assemble(cls: type[A], values: Mapping[str, object]) -> A:
    """An instance of `cls` whose fields (and groups' fields) take `values` over defaults."""
    fields: dict[str, object] = {}
    for field in attrs.fields(cls):
        settings = _settings(field)
        if settings is None:
            if _GROUP in field.metadata:
                fields[field.name] = assemble(field.metadata[_GROUP], values)
            continue
        parts = {s.part or s.env: values[s.env] for s in settings if s.env in values}
        build: Callable[[Any, Mapping[str, Any]], Any] | None = field.metadata.get(_BUILD)
        if parts:
            fields[field.name] = (
                parts[settings[0].env] if build is None else build(field.default, parts)
            )
    return cls(**fields)
