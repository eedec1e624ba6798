"""The adapter port: what every provider adapter takes, returns and raises.

Errors:
    AdapterError (ValueError)  malformed input outside a provider stream (a decoded frame file);
                               `line` is the 1-based line of the raw text. Adapters never raise
                               it for a stream: what the provider sent becomes events.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from terminus.events.inbound import InboundEvent
from terminus.events.limits import (  # the adapters' port names them; settings read them alone
    MAX_BODY_BYTES,
    MAX_BODY_RATIO,
    MAX_ERROR_BODY_BYTES,
    MAX_SSE_EVENT_CHARS,
    MAX_SSE_LINE_CHARS,
    UpstreamLimits,
)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_BODY_RATIO",
    "MAX_ERROR_BODY_BYTES",
    "MAX_SSE_EVENT_CHARS",
    "MAX_SSE_LINE_CHARS",
    "AdapterError",
    "AttemptContext",
    "ProviderAdapter",
    "Seqs",
    "UpstreamLimits",
]


class AttemptContext(msgspec.Struct, frozen=True, kw_only=True):
    """Identity stamped on every event an adapter emits for one attempt, and the bounds its
    wires read within."""

    session_id: str
    turn_id: str
    step: int = 1
    attempt: int = 1
    provider: str = ""
    model: str = ""
    ts_ms: int = 0
    limits: UpstreamLimits = UpstreamLimits()


class Seqs:
    """The next seq of one attempt. Whoever emits the attempt's events (its adapter, and the
    producer SDK around it) takes from one `Seqs`, so every event is numbered once, in the order
    it was made, without gaps."""

    __slots__ = ("next",)

    def __init__(self, first: int = 0) -> None:
        self.next = first

    def take(self) -> int:
        """The next seq, now taken."""
        seq = self.next
        self.next += 1
        return seq


class AdapterError(ValueError):
    """Provider input that cannot be parsed; `line` is where it is in the raw text, if known."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.reason = reason
        self.line = line


class ProviderAdapter(Protocol):
    """Turns one attempt's raw provider stream into inbound events with contiguous seqs."""

    def feed_sse(self, text: str) -> list[InboundEvent]:
        """Consume raw SSE text of any chunking; return the events it completed."""
        ...

    def feed_bytes(self, data: bytes) -> list[InboundEvent]:
        """Consume raw response bytes of any chunking: SSE, a JSON array or event-stream frames."""
        ...

    def feed_payload(self, payload: Any) -> list[InboundEvent]:
        """Consume one already-decoded `data:` payload."""
        ...

    def at(self, ts_ms: int) -> None:
        """Stamp the events made from now on with `ts_ms`: the producer's clock, since an
        adapter has none (a replay must be exact)."""
        ...

    def close(self) -> list[InboundEvent]:
        """EOF: flush what is pending, then `StreamClosed` unless the attempt ended in an error.

        Never raises: an event cut at EOF is discarded, and the attempt reads as cut."""
        ...
