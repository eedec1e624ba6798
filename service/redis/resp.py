"""Commands as RESP bytes, for a pump's own connection (service/runtime/line.py).

Why not redis-py's `pack_command`: it encodes each argument through its `Encoder` and checks
each for a space-separated command name, about 1.2 µs an argument; a round of sixteen owners
sends some forty, and at light load a round carries a few entries, so the packing alone came to
a tenth of the worker's CPU per event at 1,000 events/s (docs/performance.md, "Rounds that cost
what they carry"). The arguments a pump sends are bytes, text and integers; anything else is
refused as redis-py refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import DataError


def pack_commands(commands: Iterable[Sequence[Any]]) -> bytes:
    """Each command as a RESP array of bulk strings, all in one buffer."""
    out: list[bytes] = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            data = _bytes(arg)
            out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def _bytes(arg: Any) -> bytes:
    kind = type(arg)
    if kind is bytes:
        return arg  # type: ignore[no-any-return]
    if kind is str:
        return arg.encode()  # type: ignore[no-any-return]
    if kind is int:
        return b"%d" % arg
    if kind is float:
        return repr(arg).encode()
    if isinstance(arg, (bytearray, memoryview)):
        return bytes(arg)
    raise DataError(f"invalid input of type {kind.__name__!r}: convert to bytes, str or a number")
