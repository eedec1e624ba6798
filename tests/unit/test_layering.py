"""Which part of terminus may import which (issue 16), written as data and read from the code.

A part is a package of `service/` (redis, fold, runtime, ...), a module at its top (keys,
settings, redaction), the pure core (events, statemachines) or the top-level `terminus` facade.
`ALLOWED` is the architecture drawn in the README: an import that is not in it fails here, so a
new arrow is a decision someone writes down, not an accident. The table is acyclic, so the parts
import each other in no loop.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Final, NamedTuple

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
SOURCES: Final = {"service": "terminus.service", "events": "terminus.events"} | {
    "statemachines": "terminus.statemachines"
}
EVENTS: Final = "events"
MACHINES: Final = "statemachines"
ERRORS: Final = "service"  # service/__init__.py: TerminusError, the root every part's errors share
BASE: Final = frozenset(("keys", "settings", "redaction", EVENTS, MACHINES, ERRORS))

ALLOWED: Final[Mapping[str, frozenset[str]]] = {
    EVENTS: frozenset(),
    MACHINES: frozenset((EVENTS,)),
    ERRORS: frozenset(),
    "keys": frozenset(),
    "redaction": frozenset(),
    "settings": frozenset(("keys", "redaction", EVENTS, MACHINES, ERRORS)),
    "redis": frozenset(("keys", "settings", "redaction", ERRORS)),
    # The deployment's recorded shape: what every process reads as it starts.
    "shape": frozenset(("keys", "settings", EVENTS, "redis", ERRORS)),
    "metrics": BASE | {"redis"},
    "fold": BASE | {"redis", "metrics"},
    # Producers and frontends import the SDK: the contract and Redis, never the worker's parts.
    "sdk": frozenset(("keys", "settings", "redaction", EVENTS, "redis", "shape", ERRORS)),
    "retention": BASE | {"redis", "fold"},
    "runtime": BASE | {"redis", "shape", "metrics", "fold", "retention"},
    # Projections of the session frames into the protocols other frontends speak (the AI SDK
    # UI message stream): pure folds over the contract's frames, with no I/O of their own.
    "frontends": frozenset((EVENTS, MACHINES, ERRORS)),
    # The gateway reads what the workers committed; it never runs or reaches into a worker.
    "gateway": BASE | {"redis", "shape", "metrics", "fold", "sdk", "frontends"},
    # Turns told as spans (issue 36): the log folded by the core, projected; never the worker.
    "traces": BASE | {"redis", "fold", "retention"},
    # The published contract: the messages' types, the gateway's answer types and the key
    # layout; it describes what runs, and runs nothing.
    "contract": frozenset(("keys", EVENTS, MACHINES, ERRORS, "gateway", "frontends")),
    # The gateway held to the contract: a real worker folds a scene, the gateway is asked.
    "conformance": BASE | {"redis", "fold", "sdk", "runtime", "gateway", "frontends"},
    # Sinks follow what the workers committed with the workers' own fold, leases and archive
    # reader; they write to a team's database and to nothing of the workers'.
    "sinks": BASE | {"redis", "fold", "retention", "runtime"},
    "cli": BASE
    | {"redis", "shape", "metrics", "fold", "sdk", "retention", "runtime", "gateway"}
    | {"contract"}
    | {"conformance", "frontends", "sinks", "traces"},
    "terminus": frozenset(("sdk", "cli", ERRORS)),
}
WORKER_PARTS: Final = (
    "fold",
    "runtime",
    "retention",
    "gateway",
    "sinks",
    "traces",
    "cli",
    "frontends",
)
# The turn's machine; the SDK may read the core's settings types (retry policy), not these.
MACHINE_MODULES: Final = tuple(
    f"terminus.statemachines.{name}"
    for name in ("fold", "lifecycle", "table", "turn", "projection")
)


class Arrow(NamedTuple):
    path: str
    line: int
    imported: str
    part: str


def part_of(module: str) -> str | None:
    """The part a module of terminus belongs to; None for any other module."""
    names = module.split(".")
    if names[0] != "terminus":
        return None
    if len(names) == 1:
        return "terminus"
    if names[1] in (EVENTS, MACHINES):
        return names[1]
    return names[2] if len(names) > 2 else names[1]


def module_of(path: Path) -> str:
    top, *rest = path.relative_to(ROOT).with_suffix("").parts
    if top == "service" and rest[:1] == ["facade"]:
        return "terminus"
    dotted = ".".join([SOURCES[top], *rest])
    return dotted.removesuffix(".__init__")


def is_module(dotted: str) -> bool:
    names = dotted.split(".")
    if names[:2] == ["terminus", "service"] and len(names) == 3:
        return (ROOT / "service" / names[2]).with_suffix(".py").is_file() or (
            ROOT / "service" / names[2] / "__init__.py"
        ).is_file()
    return False


def arrows(path: str, source: str, importer: str) -> Iterator[Arrow]:
    """Every import of another part of terminus in `source`, wherever the statement sits;
    `from terminus.service import settings` is an import of `terminus.service.settings`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [
                f"{node.module}.{alias.name}"
                if is_module(f"{node.module}.{alias.name}")
                else node.module
                for alias in node.names
            ]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            part = part_of(module)
            if part is not None and part != importer:
                yield Arrow(path, node.lineno, module, part)


def forbidden(path: str, source: str, importer: str) -> list[Arrow]:
    return [a for a in arrows(path, source, importer) if a.part not in ALLOWED[importer]]


def source_files() -> list[Path]:
    return sorted(path for top in SOURCES for path in (ROOT / top).rglob("*.py"))


def every_arrow() -> Iterator[tuple[str, Arrow]]:
    for path in source_files():
        importer = part_of(module_of(path))
        assert importer is not None
        for arrow in arrows(str(path.relative_to(ROOT)), path.read_text("utf-8"), importer):
            yield importer, arrow


def test_every_part_is_in_the_table() -> None:
    parts = {part_of(module_of(path)) for path in source_files()}
    assert parts <= set(ALLOWED), sorted(str(p) for p in parts - set(ALLOWED))
    assert {"redis", "fold", "runtime", "gateway", "sdk", "cli", EVENTS, MACHINES} <= parts


@pytest.mark.parametrize("importer", sorted(ALLOWED))
def test_a_part_imports_only_what_the_table_allows(importer: str) -> None:
    found = [
        arrow
        for part, arrow in every_arrow()
        if part == importer and arrow.part not in ALLOWED[importer]
    ]
    assert found == []


def test_the_table_has_no_loop_and_neither_has_the_code() -> None:
    TopologicalSorter(ALLOWED).prepare()  # raises CycleError on a loop
    drawn: dict[str, set[str]] = {part: set() for part in ALLOWED}
    for importer, arrow in every_arrow():
        drawn[importer].add(arrow.part)
    TopologicalSorter(drawn).prepare()


def test_the_checks_fail_on_a_forbidden_import_and_on_a_loop() -> None:
    """A test of the test: the arrows the table forbids are found, wherever they sit."""
    planted = "def f():\n    from terminus.service.runtime.pump import Pump\n    return Pump\n"
    assert forbidden("service/gateway/routes.py", planted, "gateway") == [
        Arrow("service/gateway/routes.py", 2, "terminus.service.runtime.pump", "runtime")
    ]
    assert forbidden("service/sdk/live.py", "import terminus.statemachines.fold\n", "sdk")
    assert forbidden("service/sdk/live.py", "from terminus.service.fold import commit\n", "sdk")
    assert not forbidden(
        "service/sdk/live.py", "from terminus.service.redis import replies\n", "sdk"
    )
    with pytest.raises(CycleError):
        TopologicalSorter({**ALLOWED, "redis": ALLOWED["redis"] | {"fold"}}).prepare()


def test_nothing_imports_the_repository_folders_by_their_own_names() -> None:
    """Installed, `service`, `events` and `statemachines` exist only under `terminus`: an import
    of the bare name works in a checkout (the repository root is on the path) and nowhere else,
    and would load a second copy of every module it reaches."""
    bare = {"service", EVENTS, MACHINES}
    files = (
        source_files()
        + sorted((ROOT / "tests").rglob("*.py"))
        + sorted((ROOT / "bench").rglob("*.py"))
    )
    found = []
    for path in files:
        if "fixtures" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path}:{node.lineno} {n}" for n in names if n.split(".")[0] in bare]
    assert found == []


SDK_PROBE: Final = """
import json, sys
import terminus
before = sorted(m for m in sys.modules if m.startswith("terminus"))
import terminus.service.sdk.producer, terminus.service.sdk.subscriber, terminus.service.sdk.views
after = sorted(m for m in sys.modules if m.startswith("terminus"))
print(json.dumps({"facade": before, "sdk": after}))
"""


def test_importing_the_sdk_loads_no_worker_code_in_a_fresh_interpreter() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SDK_PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert loaded["facade"] == ["terminus"], "the facade loads its names on first use only"
    parts = {part_of(module) for module in loaded["sdk"]}
    assert parts.isdisjoint(WORKER_PARTS), sorted(loaded["sdk"])
    assert set(loaded["sdk"]).isdisjoint(MACHINE_MODULES), sorted(loaded["sdk"])
    assert "terminus.service.sdk.producer" in loaded["sdk"]
