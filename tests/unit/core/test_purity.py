"""karpy.core stays pure: no I/O, clock, logging, randomness or concurrency modules, and every
module says so (and why) in its docstring."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import karpy.core

CORE = Path(karpy.core.__file__).parent
MODULES = sorted(CORE.rglob("*.py"))
FORBIDDEN = {
    "asyncio", "logging", "time", "random", "secrets", "os", "sys", "io", "pathlib", "socket",
    "subprocess", "threading", "multiprocessing", "datetime", "json", "yaml", "orjson",
    "opentelemetry", "kubernetes_asyncio", "aiobotocore", "botocore", "uvloop",
}  # fmt: skip
ALLOWED_KARPY = ("karpy.core", "karpy.apis.v1.labels")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(CORE)) for p in MODULES])
def test_module_imports_nothing_impure(path: Path) -> None:
    for name in _imports(path):
        assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
        if name.startswith("karpy.") and name != "karpy.apis.v1":
            assert name.startswith(ALLOWED_KARPY), f"{path.name} imports {name}"


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(CORE)) for p in MODULES])
def test_module_docstring_says_pure(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert doc, f"{path.name} has no docstring"
    assert "pure" in doc.lower(), f"{path.name}'s docstring does not say it is pure"
