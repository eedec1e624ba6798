"""Incremental Server-Sent Events framing: text in any chunking -> frames with line numbers.

Framing follows the WHATWG event-stream rules, with one addition for real gateways:
- an event is dispatched only by the blank line that ends it; at EOF an unterminated line and
  an event without its blank line are discarded (the stream was cut mid-event);
- a run of lines that are not SSE fields (`event`, `data`, `id`, `retry`) and not comments is
  ignored by the standard; when such a run is a JSON object (a gateway appending an unframed
  error body to the stream, pretty-printed or not), it is handed on as an `unframed` frame so
  the adapter can report the error instead of losing it.
"""

from __future__ import annotations

import re

import msgspec

_NEWLINE = re.compile(r"\r\n|\r|\n")
_FIELDS = frozenset(("event", "data", "id", "retry"))


class Frame(msgspec.Struct, frozen=True):
    """One dispatched SSE event; `data` is None when the event had no data line."""

    event: str | None
    data: str | None
    line: int
    unframed: bool = False


class SseParser:
    """Splits on LF, CRLF and CR (also across chunks), skips `:` comments, counts lines."""

    def __init__(self) -> None:
        self._partial: list[str] = []
        self._skip_lf = False
        self._started = False
        self._line_no = 0
        self._event: str | None = None
        self._data: list[str] = []
        self._first_line = 0
        self._stray: list[str] = []
        self._stray_line = 0
        self._frames: list[Frame] = []
        self.cut = False

    def feed(self, text: str) -> list[Frame]:
        """Frames completed by `text`; an unterminated last line waits for more input."""
        text = self._strip_prefix(text)
        if not text:
            return self._take()
        lines = _NEWLINE.split(text)
        if len(lines) == 1:
            self._partial.append(text)
            return self._take()
        lines[0] = "".join([*self._partial, lines[0]])
        last = lines.pop()
        self._partial = [last] if last else []
        # A CR at the very end may be the first half of a CRLF split across chunks.
        self._skip_lf = text.endswith("\r")
        for line in lines:
            self._line(line)
        return self._take()

    def finish(self) -> list[Frame]:
        """EOF: a pending event or line is discarded (`cut` says whether there was one)."""
        partial = "".join(self._partial)
        self._partial = []
        if partial and _is_stray(partial):
            self._stray_line = self._stray_line or self._line_no + 1
            self._stray.append(partial)
            partial = ""
        self.cut = bool(partial or self._data or self._event is not None)
        self._flush_stray()
        self._event, self._data = None, []
        return self._take()

    def _strip_prefix(self, text: str) -> str:
        if self._skip_lf and text:
            self._skip_lf = False
            text = text.removeprefix("\n")
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        return text

    def _line(self, line: str) -> None:
        self._line_no += 1
        if not line:
            self._flush_stray()
            self._dispatch()
            return
        if line.startswith(":"):
            return
        if _is_stray(line):
            self._stray_line = self._stray_line or self._line_no
            self._stray.append(line)
            return
        self._flush_stray()
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        match field:
            case "event":
                self._event = value
                self._first_line = self._first_line or self._line_no
            case "data":
                if not self._data:
                    self._first_line = self._line_no
                self._data.append(value)
            case _:
                pass

    def _flush_stray(self) -> None:
        """A run of non-SSE lines is kept only if it is a JSON object."""
        if not self._stray:
            return
        text, line = "\n".join(self._stray), self._stray_line
        self._stray, self._stray_line = [], 0
        if text.lstrip().startswith("{"):
            self._frames.append(Frame(None, text, line, unframed=True))

    def _dispatch(self) -> None:
        if self._data or self._event is not None:
            data = "\n".join(self._data) if self._data else None
            self._frames.append(Frame(self._event, data, self._first_line))
        self._event = None
        self._data = []
        self._first_line = 0

    def _take(self) -> list[Frame]:
        frames, self._frames = self._frames, []
        return frames


def _is_stray(line: str) -> bool:
    """Not an SSE field line and not a comment: the standard ignores it."""
    return not line.startswith(":") and line.partition(":")[0] not in _FIELDS
