"""What `pip install .` installs (issue 16): one top-level package, `terminus`, holding every
module of the repository's `service/`, `events/` and `statemachines/` under its installed name,
with the Lua scripts, the demo transcripts and the inspector's page; no bare `service`, `events`
or `statemachines` that would collide with a platform's own packages."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Final

import pytest

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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("terminus-*.whl")
    return zipfile.ZipFile(built)


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
