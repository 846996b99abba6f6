"""Provider discovery through real entry points.

Each test writes a throwaway distribution (a ``*.dist-info`` with ``entry_points.txt`` and a
module) into a temporary directory and puts it on ``sys.path``, so ``importlib.metadata`` finds
it exactly as it finds an installed provider; nothing is installed into the environment.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from karpy.cloudprovider import CloudProvider
from karpy.cloudprovider.registry import (
    ENTRY_POINT_GROUP,
    ProviderConfigError,
    ProviderContext,
    ProviderError,
    UnknownProviderError,
    available_providers,
    build_provider,
    load_factory,
)
from karpy.runtime.clock import FakeClock
from karpy.testing.fake_cloudprovider import FakeCloudProvider

MODULE = """
from karpy.cloudprovider.registry import ProviderConfigError
from karpy.testing.fake_cloudprovider import FakeCloudProvider

built = []

def build(context):
    unknown = set(context.settings) - {"types"}
    if unknown:
        raise ProviderConfigError(f"fake provider: unknown setting {sorted(unknown)[0]!r}")
    built.append(context)
    return FakeCloudProvider()

async def build_async(context):
    return FakeCloudProvider()

def build_wrong_name(context):
    return FakeCloudProvider()

def build_not_a_provider(context):
    return object()

NOT_CALLABLE = 3
"""


Install = Callable[[str, str, dict[str, str]], None]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Returns ``install(dist, module, {name: target})``."""
    modules: list[str] = []

    def _install(dist: str, module: str, entries: dict[str, str]) -> None:
        (tmp_path / f"{module}.py").write_text(MODULE)
        info = tmp_path / f"{dist.replace('-', '_')}-1.0.dist-info"  # wheel naming
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
        modules.append(module)

    monkeypatch.syspath_prepend(str(tmp_path))
    yield _install
    for module in modules:
        sys.modules.pop(module, None)


def _context(settings: dict[str, str] | None = None) -> ProviderContext[None, None]:
    return ProviderContext(
        kube=None, clock=FakeClock(), cluster_name="test", settings=settings or {}
    )


async def test_a_provider_is_found_and_built_through_its_entry_point(install: Install) -> None:
    install("karpy-test-fake", "karpy_test_fake", {"fake": "karpy_test_fake:build"})
    assert "fake" in available_providers()
    context = _context({"types": "4"})
    provider = await build_provider("fake", context)
    assert isinstance(provider, FakeCloudProvider)
    assert isinstance(provider, CloudProvider)
    module = sys.modules["karpy_test_fake"]
    assert module.built == [context]


async def test_an_async_factory_is_awaited(install: Install) -> None:
    install("karpy-test-async", "karpy_test_async", {"fake": "karpy_test_async:build_async"})
    assert (await build_provider("fake", _context())).name == "fake"


async def test_an_unknown_name_lists_the_available_ones(install: Install) -> None:
    install("karpy-test-two", "karpy_test_two", {"fake": "karpy_test_two:build"})
    with pytest.raises(UnknownProviderError) as caught:
        await build_provider("azure", _context())
    assert "unknown cloud provider 'azure'" in str(caught.value)
    assert "fake" in caught.value.available
    assert "fake" in str(caught.value)


async def test_factory_errors_propagate(install: Install) -> None:
    install("karpy-test-cfg", "karpy_test_cfg", {"fake": "karpy_test_cfg:build"})
    with pytest.raises(ProviderConfigError, match="unknown setting 'colour'"):
        await build_provider("fake", _context({"colour": "red"}))


@pytest.mark.parametrize(
    ("target", "message"),
    [
        pytest.param("karpy_test_bad:missing", "cannot load", id="missing-attribute"),
        pytest.param("karpy_test_bad_nomodule:build", "cannot load", id="missing-module"),
        pytest.param("karpy_test_bad:NOT_CALLABLE", "is not callable", id="not-callable"),
        pytest.param(
            "karpy_test_bad:build_not_a_provider",
            "does not implement the CloudProvider Protocol",
            id="not-a-provider",
        ),
    ],
)
async def test_broken_entry_points_say_what_is_wrong(
    install: Install, target: str, message: str
) -> None:
    install("karpy-test-bad", "karpy_test_bad", {"broken": target})
    with pytest.raises(ProviderError, match=message) as caught:
        await build_provider("broken", _context())
    assert "'broken'" in str(caught.value)


async def test_the_entry_point_name_must_match_the_provider_name(install: Install) -> None:
    install("karpy-test-name", "karpy_test_name", {"other": "karpy_test_name:build_wrong_name"})
    with pytest.raises(ProviderError, match="built a provider named 'fake'"):
        await build_provider("other", _context())


def test_two_distributions_claiming_one_name_is_an_error(install: Install) -> None:
    install("karpy-test-a", "karpy_test_a", {"twice": "karpy_test_a:build"})
    install("karpy-test-b", "karpy_test_b", {"twice": "karpy_test_b:build"})
    with pytest.raises(ProviderError, match="registered more than once"):
        load_factory("twice")
