"""What `pip install .` installs (issue 16): one top-level package, `terminus`, holding every
module of the repository's `service/`, `events/` and `statemachines/` under its installed name,
with the Lua scripts, the demo transcripts and the inspector's page; no bare `service`, `events`
or `statemachines` that would collide with a platform's own packages."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import pytest
from pip._vendor.pyproject_hooks import BuildBackendHookCaller, quiet_subprocess_runner

ROOT: Final = Path(__file__).resolve().parents[2]
HOMES: Final = {"service": "terminus/service", "events": "terminus/events"} | {
    "statemachines": "terminus/statemachines"
}
FACADE: Final = Path("service/facade")


def installed_path(path: Path) -> str:
    """Where a file of the repository lands in the wheel."""
    rel = path.relative_to(ROOT)
    if rel.is_relative_to(FACADE):
        return f"terminus/{rel.relative_to(FACADE).as_posix()}"
    top, *rest = rel.parts
    return "/".join([HOMES[top], *rest])


def shipped_files() -> list[Path]:
    files = []
    for top in HOMES:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                files.append(path)
    return sorted(files)


def test_the_package_list_names_every_package_of_the_repository() -> None:
    """setuptools is given the list (a mapped layout cannot be found by walking): a new package
    folder missing from it would be left out of the install and fail only there."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {
        installed_path(init).removesuffix("/__init__.py").replace("/", ".")
        for init in ROOT.glob("*/**/__init__.py")
        if init.relative_to(ROOT).parts[0] in HOMES
    }
    assert listed == on_disk


class Built(NamedTuple):
    wheel: zipfile.ZipFile
    said: str  # what pip printed while building it


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = out.glob("terminus-*.whl")
    return Built(zipfile.ZipFile(wheel), done.stdout + done.stderr)


@pytest.fixture(scope="module")
def wheel(built: Built) -> zipfile.ZipFile:
    return built.wheel


def test_building_the_wheel_prints_no_setuptools_warning(built: Built) -> None:
    """Issue 31: every install printed about 130 lines of warnings, a page per data folder."""
    assert "Warning" not in built.said, built.said


def test_an_editable_install_as_setup_runs_it_warns_of_nothing(tmp_path: Path) -> None:
    """The hook pip calls for `.ci/setup`'s `pip install -e`, in the environment setup gives it:
    every warning it records is one pip would print."""
    quiet = re.search(r'PYTHONWARNINGS="([^"]*)"', (ROOT / ".ci" / "setup").read_text())
    assert quiet is not None

    def runner(
        cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None
    ) -> None:
        env = {**(extra_environ or {}), "PYTHONWARNINGS": quiet[1]}
        quiet_subprocess_runner(cmd, cwd, env)

    hooks = BuildBackendHookCaller(str(ROOT), "setuptools.build_meta", runner=runner)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        hooks.build_editable(str(tmp_path))
    assert [str(w.message) for w in seen] == []


def test_the_wheel_installs_terminus_alone(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"terminus"}


def test_the_wheel_holds_every_file_of_the_three_folders(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = {installed_path(path) for path in shipped_files()}
    assert expected - names == set()
    assert {"terminus/service/redis/lua/commit.lua", "terminus/__main__.py"} <= names
    assert any(name.startswith("terminus/service/cli/demo_transcripts/") for name in names)
    assert "terminus/service/gateway/static/inspector.js" in names


def test_the_wheel_names_the_command_line(wheel: zipfile.ZipFile) -> None:
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "terminus = terminus.service.cli.main:main" in wheel.read(entry_points).decode()
