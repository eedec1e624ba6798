"""The Python and TypeScript `LiveSession`s show the same view of the same recorded frame
sequences (tests/agreement: discards, retries, tool steps, failures, a turn its user stopped,
resumes with duplicates, and a newer server's stream with a frame kind and a field neither
knows, which both pass over and count alike).

The views the Python one makes are committed beside the sequences; the TypeScript client's
`npm test` holds its own to them, and here both run side by side on every sequence when Node and
the built client are present (the gate builds it first)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, get_args

import pytest
from agreement.views import SEQUENCES, VIEWS, python_view

from terminus.events.outbound import SessionUpdate
from terminus.service.sdk.updates import KINDS

SEQUENCE_FILES = sorted(SEQUENCES.glob("*.jsonl"))
CLIENT = Path(__file__).parents[2] / "clients" / "typescript"
VIEW_CLI = CLIENT / "build" / "tools" / "view-cli.js"


def recorded_frames() -> list[dict[str, Any]]:
    return [
        json.loads(json.loads(line)["data"])
        for path in SEQUENCE_FILES
        for line in path.read_text().splitlines()
    ]


def test_there_are_recorded_sequences_of_every_kind() -> None:
    frames = recorded_frames()
    kinds = {frame["sessionUpdate"] for frame in frames}
    assert len(SEQUENCE_FILES) >= 5
    assert {"attempt_discarded", "retrying", "tool_call", "agent_error", "turn_finished"} <= kinds
    assert "cancelled" in {frame.get("stopReason") for frame in frames}


def test_a_sequence_carries_a_kind_and_a_field_from_the_future() -> None:
    frames = recorded_frames()
    assert {frame["sessionUpdate"] for frame in frames} - KINDS
    fields = set().union(*(f for f in frames if f["sessionUpdate"] in KINDS))
    assert fields - set().union(*(t.__struct_fields__ for t in get_args(SessionUpdate)))


def test_a_stopped_turn_is_cancelled_and_a_newer_servers_kind_is_counted() -> None:
    stopped = json.loads((VIEWS / "stopped-then-asked-again.json").read_text())
    future = json.loads((VIEWS / "from-a-newer-server.json").read_text())
    assert [t["status"] for t in stopped["turns"]] == ["cancelled", "finished"]
    assert future["turns"] == stopped["turns"]
    assert future["unknown_frames"] == {"usage_forecast": 6}


@pytest.mark.parametrize("path", SEQUENCE_FILES, ids=lambda p: p.stem)
def test_the_python_view_is_the_committed_one(path: Path) -> None:
    committed = json.loads((VIEWS / f"{path.stem}.json").read_text())
    assert python_view(path) == committed, "run `python -m tests.agreement.record`"


@pytest.mark.parametrize("path", SEQUENCE_FILES, ids=lambda p: p.stem)
def test_the_typescript_view_is_the_python_one(path: Path) -> None:
    node = shutil.which("node")
    if node is None or not VIEW_CLI.is_file():
        pytest.skip("no Node.js or no built TypeScript client (cd clients/typescript && npm test)")
    shown = subprocess.run(
        [node, str(VIEW_CLI), str(path)], capture_output=True, check=True, timeout=60
    )
    assert json.loads(shown.stdout) == python_view(path)
