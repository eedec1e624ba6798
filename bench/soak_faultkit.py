"""The fault tests' machinery, imported in place: one copy serves tests/faults and the soak.

tests/faults is not a package (pytest puts its directory, and tests/, on the path and its modules
import each other by plain name), so the soak puts the same folders on the path and imports the same
modules: the worker harness, the recording producer, the in-process fold (the oracle of every
fault test), the blackhole proxy and the malformed entry kinds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

TESTS: Final = Path(__file__).resolve().parents[1] / "tests"
for folder in (TESTS, TESTS / "faults"):  # as pytest's rootdir conftest and faults/ put them
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import expect as expect  # noqa: E402
import harness as harness  # noqa: E402
import load as load  # noqa: E402
import malformed as malformed  # noqa: E402
import proxy as proxy  # noqa: E402

__all__ = ["expect", "harness", "load", "malformed", "proxy"]
