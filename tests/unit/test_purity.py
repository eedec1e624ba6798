"""The functional core imports no I/O, clock or randomness (STYLE rule 1), not even transitively."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
# The frontends' projections are folds over frames, held to the core's rules (DESIGN section 7).
CORE_PACKAGES: Final = ("events", "statemachines", "service/frontends")
CORE_MODULES: Final = (  # their installed names
    "terminus.events",
    "terminus.statemachines",
    "terminus.service.frontends",
)
FORBIDDEN: Final = frozenset(
    ("redis", "faststream", "asyncio", "socket", "time", "random", "uuid", "os")
)
# The standard library itself imports time, os and random at startup; only these four can be
# checked in a running interpreter.
FORBIDDEN_AT_RUNTIME: Final = ("redis", "faststream", "asyncio", "socket")
DYNAMIC_IMPORTERS: Final = frozenset(("__import__", "import_module"))


def _top(module: str) -> str:
    return module.split(".")[0]


def _dynamic_target(node: ast.Call) -> str | None:
    """The module named by `__import__("x")` or `importlib.import_module("x")`, if constant."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in DYNAMIC_IMPORTERS or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imported_modules(source: str) -> list[str]:
    """Every absolute module a source imports, wherever the import statement sits."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node)
            found.extend([target] if target else [])
    return found


def forbidden_imports(source: str) -> list[str]:
    return [name for name in imported_modules(source) if _top(name) in FORBIDDEN]


def core_files() -> list[Path]:
    return sorted(path for package in CORE_PACKAGES for path in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize(
    "source",
    [
        "import time",
        "import os",
        "import os.path",
        "from os import path",
        "from os.path import join",
        "import asyncio as aio",
        "import json, socket",
        "from uuid import uuid4",
        "from random import Random",
        "import redis.asyncio",
        "from faststream.redis import RedisBroker",
        "def later() -> None:\n    import time\n",
        "if True:\n    from os import environ\n",
        "clock = __import__('time')",
        "import importlib\nrandomness = importlib.import_module('random')",
    ],
)
def test_scanner_flags_forbidden_imports(source: str) -> None:
    assert forbidden_imports(source)


@pytest.mark.parametrize(
    "source",
    [
        "import timeit",
        "import datetime",
        "from ostruct import x",
        "from .time import clock",
        "from . import os",
        "import hashlib",
        "# import time",
        "text = 'import os'",
    ],
)
def test_scanner_ignores_allowed_imports(source: str) -> None:
    assert not forbidden_imports(source)


def test_core_scan_is_not_vacuous() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in core_files()}
    expected = {"events/inbound.py", "events/codec.py", "statemachines/fold.py"}
    expected |= {"service/frontends/ui_stream.py"}
    assert expected <= names
    assert "statemachines/table.py" in names


@pytest.mark.parametrize("path", core_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_core_module_imports_nothing_forbidden(path: Path) -> None:
    assert forbidden_imports(path.read_text(encoding="utf-8")) == []


PROBE: Final = """
import importlib, json, pkgutil, sys

watched = set(sys.argv[1].split(","))
already = sorted(name for name in sys.modules if name.split(".")[0] in watched)
seen = []

class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in watched:
            seen.append(name)
        return None

sys.meta_path.insert(0, Recorder())
for package_name in sys.argv[2:]:
    package = importlib.import_module(package_name)
    for info in pkgutil.walk_packages(getattr(package, "__path__", []), package_name + "."):
        importlib.import_module(info.name)
loaded = sorted(name for name in sys.modules if name.split(".")[0] in watched)
files = sorted(m.__file__ or "" for m in list(sys.modules.values())
               if any(m.__name__ == p or m.__name__.startswith(p + ".") for p in sys.argv[2:]))
print(json.dumps({"already": already, "hooked": sorted(set(seen)), "loaded": loaded,
                  "files": files}))
"""


def probe(*packages: str) -> dict[str, list[str]]:
    """Import packages and all their modules in a fresh interpreter; report watched modules."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(FORBIDDEN_AT_RUNTIME), *packages],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, list[str]] = json.loads(result.stdout)
    return report


def test_probe_detects_a_transitive_import() -> None:
    report = probe("asyncio.base_events")
    assert "asyncio" in report["hooked"]
    assert "asyncio" in report["loaded"]


def test_core_packages_import_no_io_transitively() -> None:
    report = probe(*CORE_MODULES)
    assert report["already"] == [], "the interpreter preloaded them: the check would prove nothing"
    assert report["hooked"] == []
    assert report["loaded"] == []
    core = {path.as_posix() for path in core_files()}
    assert core <= set(report["files"]), "every core module was imported"
