"""The Python and TypeScript `LiveSession`s show the same view of the same recorded frame
sequences (tests/agreement: discards, retries, tool steps, failures, resumes with duplicates).

The views the Python one makes are committed beside the sequences; the TypeScript client's
`npm test` holds its own to them, and here both run side by side on every sequence when Node and
the built client are present (the gate builds it first)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from agreement.views import SEQUENCES, VIEWS, python_view

SEQUENCE_FILES = sorted(SEQUENCES.glob("*.jsonl"))
CLIENT = Path(__file__).parents[2] / "clients" / "typescript"
VIEW_CLI = CLIENT / "build" / "tools" / "view-cli.js"


def test_there_are_recorded_sequences_of_every_kind() -> None:
    kinds = set()
    for path in SEQUENCE_FILES:
        for line in path.read_text().splitlines():
            kinds.add(json.loads(json.loads(line)["data"])["sessionUpdate"])
    assert len(SEQUENCE_FILES) >= 5
    assert {"attempt_discarded", "retrying", "tool_call", "agent_error", "turn_finished"} <= kinds


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
