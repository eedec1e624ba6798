"""How a benchmark's main prints its report: one JSON object with `--json`, else a table."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec


def emit(report: dict[str, Any], as_json: bool, table: Callable[[dict[str, Any]], str]) -> None:
    """`report` on stdout: as one line of JSON if `as_json`, else as `table` renders it."""
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print(table(report))
