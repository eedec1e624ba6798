"""Query parameters from clients, read strictly: a bad one is the client's error (400), never ours.

`str.isdigit()` alone is not enough: it accepts "²" and other Unicode digits that `int()` refuses,
which once answered `?offset=²` with a 500 and a traceback.
"""

from __future__ import annotations

from typing import Final

from terminus.service import TerminusError

MAX_DIGITS: Final = 18  # far past any offset or limit, far below what costs int() anything


class BadParam(TerminusError, ValueError):
    """The parameter's value is not what it must be; the message names it."""


def non_negative(given: str | None, name: str, default: int) -> int:
    """`given` as a non-negative integer written in ASCII digits, `default` if absent."""
    if given is None:
        return default
    if not (given.isascii() and given.isdigit()) or len(given) > MAX_DIGITS:
        raise BadParam(f"{name} must be a non-negative integer")
    return int(given)
