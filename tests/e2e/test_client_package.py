"""The TypeScript client installs into an app as its README says: `npm pack` builds it (its
`prepare` compiles src/ to JavaScript and .d.ts) and the tarball installs offline, since it has
no runtime dependency; the folder itself installs by its path. Each time a small app imports it,
type-checks against its declarations, runs, and folds a stopped turn and a newer server's frame.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest
from contract_support import node_tools

CLIENT: Final = Path(__file__).parents[2] / "clients" / "typescript"
PACKAGE: Final = "@terminus-llm/client"
APP_TS: Final = """\
import { LiveSession, UnknownFrames, decoded } from "@terminus-llm/client";
import type { TurnStatus, Update } from "@terminus-llm/client";

const ids = { session_id: "s", turn_id: "t" };
const frames: object[] = [
  { sessionUpdate: "agent_message_chunk", ...ids, step: 1, attempt: 1, part_id: "p", delta: "Hal" },
  { sessionUpdate: "usage_forecast", ...ids, tokens_left: 9 },
  { sessionUpdate: "turn_finished", ...ids, stopReason: "cancelled", usage: {}, billing: 1 },
];
const view = new LiveSession();
const unknown = new UnknownFrames(() => undefined);
const kinds: string[] = [];
frames.forEach((frame, n) => {
  const update: Update | null = decoded(`1-${n}`, JSON.stringify(frame), unknown);
  if (update === null) return;
  kinds.push(update.kind);
  view.apply(update);
});
const status: TurnStatus | undefined = view.turns.get("t")?.status;
console.log(JSON.stringify({ kinds, status, unknown: Object.fromEntries(unknown.counts) }));
"""
SHOWN: Final = {
    "kinds": ["agent_message_chunk", "turn_finished"],
    "status": "cancelled",
    "unknown": {"usage_forecast": 1},
}
TSCONFIG: Final = {
    "compilerOptions": {
        "target": "ES2022",
        "module": "NodeNext",
        "moduleResolution": "NodeNext",
        "strict": True,
        "types": [],
        "lib": ["ES2022", "DOM"],
        "outDir": "out",
    },
    "files": ["app.ts"],
}


def npm(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["npm", "--no-audit", "--no-fund", "--loglevel=error", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def tools() -> Path:
    """tests/contract's Node tools (its TypeScript compiles the app), with npm beside node."""
    found = node_tools()
    if shutil.which("npm") is None:
        pytest.skip("no npm here: the client's packaging is not checked")
    if not (CLIENT / "node_modules").is_dir():
        pytest.skip("clients/typescript has no node_modules: `npm ci` there (the gate does)")
    return found


def app(directory: Path) -> Path:
    directory.mkdir()
    package = {"name": "app", "private": True, "type": "module"}
    (directory / "package.json").write_text(json.dumps(package))
    (directory / "app.ts").write_text(APP_TS)
    (directory / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    return directory


def runs(directory: Path, tools: Path) -> None:
    """The app type-checks against the installed declarations, and its JavaScript runs."""
    tsc = tools / "node_modules" / "typescript" / "bin" / "tsc"
    checked = subprocess.run(["node", str(tsc)], cwd=directory, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    ran = subprocess.run(["node", "out/app.js"], cwd=directory, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == SHOWN


def test_the_packed_tarball_installs_offline_and_runs(tmp_path: Path, tools: Path) -> None:
    packed = json.loads(npm("pack", "--json", "--pack-destination", str(tmp_path), cwd=CLIENT))
    files = {f["path"] for f in packed[0]["files"]}
    assert {"build/src/index.js", "build/src/index.d.ts", "build/src/contract.d.ts"} <= files
    assert not {f for f in files if f.startswith(("src/", "test/", "build/test/"))}
    home = app(tmp_path / "app")
    npm("install", "--offline", str(tmp_path / packed[0]["filename"]), cwd=home)
    installed = home / "node_modules" / PACKAGE
    assert not installed.is_symlink()
    assert (installed / "build" / "src" / "live.d.ts").is_file()
    runs(home, tools)


def test_the_folder_installs_by_its_path_and_runs(tmp_path: Path, tools: Path) -> None:
    home = app(tmp_path / "app")
    npm("install", "--offline", str(CLIENT), cwd=home)
    assert (home / "node_modules" / PACKAGE / "build" / "src" / "index.js").is_file()
    runs(home, tools)
