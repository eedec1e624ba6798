"""Read a transcript file into the inbound events of one attempt, with the line each came from.

Used by `simulate`, `publish` and the demo. A bad file raises `TranscriptError` naming the file and,
where known, the line. A provider stream is never a bad file: one cut short or with unreadable
events is what the provider sent, and reads as that attempt's `stream-closed` or `stream-error`.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

import msgspec

from terminus.events.adapters import AdapterError, AttemptContext, http_error_event
from terminus.events.adapters import make_adapter as _make_adapter
from terminus.events.inbound import EVENT_TYPES, InboundEvent
from terminus.service import TerminusError
from terminus.statemachines.retry_hints import parse_instant_ms

Located = tuple[InboundEvent, int | None]
_IDENTITY = ("session_id", "turn_id", "step", "attempt", "seq")
EVENT_TAGS = frozenset(str(t.__struct_config__.tag) for t in EVENT_TYPES)
TOOL_OUTCOME_TAGS = frozenset(("tool-result", "tool-error"))


class TranscriptError(TerminusError):
    """One line: `FILE[:LINE]: reason`."""


def read_attempt(
    path: Path, ctx: AttemptContext, provider: str | None, first_seq: int
) -> list[Located]:
    """Events of one attempt; a leading `attempt-started` takes `first_seq`, the rest follow it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return _parse(path, raw, ctx, provider, first_seq)
    except AdapterError as exc:
        where = f"{path}:{exc.line}" if exc.line is not None else str(path)
        raise TranscriptError(f"{where}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{path}: not UTF-8 text ({exc.reason})") from None


def _parse(
    path: Path, raw: bytes, ctx: AttemptContext, provider: str | None, first_seq: int
) -> list[Located]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl" and _is_normalized(path, raw.decode()):
        return _normalized(path, raw.decode(), ctx, first_seq)
    if suffix == ".json":
        return _json_file(path, raw, ctx, provider, first_seq)
    adapter_provider = _need_provider(path, provider)
    adapter = _make_adapter(adapter_provider, ctx, first_seq + 1)
    if suffix == ".jsonl":
        events = [e for p in _json_lines(path, raw.decode()) for e in adapter.feed_payload(p)]
    else:
        # The response body as it came off the wire: SSE, a JSON array or event-stream frames.
        events = adapter.feed_bytes(raw)
    return [(e, None) for e in [*events, *adapter.close()]]


def read_log(path: Path, session_id: str, turn_id: str) -> list[Located] | None:
    """A normalized `.jsonl` whose events carry their own `seq` (decided by the first): the events
    as given, across any number of steps and attempts (only the session and turn ids are the
    caller's). None for any other file."""
    lines = _normalized_lines(path)
    first = next(lines, None)
    if first is None or "seq" not in first[0]:
        return None
    located: list[Located] = []
    for doc, number in chain([first], lines):
        if "seq" not in doc:
            raise TranscriptError(f"{path}:{number}: every event of a log carries its seq")
        doc.update(session_id=session_id, turn_id=turn_id)
        located.append((_convert(path, doc, number), number))
    return located


def read_tool_outcomes(path: Path, ctx: AttemptContext, first_seq: int) -> list[Located] | None:
    """A normalized `.jsonl` of `tool-result` / `tool-error` lines without seqs (decided by the
    first): the results of the step that awaits them, stamped with its identity from
    `first_seq`. None for any other file."""
    lines = _normalized_lines(path)
    first = next(lines, None)
    if first is None or not _is_tool_outcome(first[0]):
        return None
    located: list[Located] = []
    for seq, (doc, number) in enumerate(chain([first], lines), start=first_seq):
        if not _is_tool_outcome(doc):
            raise TranscriptError(f"{path}:{number}: a tool results file holds only tool results")
        located.append(_stamped(path, doc, number, ctx, seq))
    return located


def _is_tool_outcome(doc: dict[str, Any]) -> bool:
    return doc.get("type") in TOOL_OUTCOME_TAGS and "seq" not in doc


def _normalized_lines(path: Path) -> Iterator[tuple[dict[str, Any], int]]:
    """The JSON objects of a normalized `.jsonl` with their lines, decoded as they are read (so
    the first bad line is the one reported); nothing for any other file."""
    if path.suffix.lower() != ".jsonl":
        return iter(())
    try:
        text = path.read_bytes().decode()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{path}: not UTF-8 text ({exc.reason})") from None
    if not _is_normalized(path, text):
        return iter(())
    return _objects(path, text)


def _objects(path: Path, text: str) -> Iterator[tuple[dict[str, Any], int]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            doc = _decode_json(path, line, number)
            if not isinstance(doc, dict):
                raise TranscriptError(f"{path}:{number}: an event must be a JSON object")
            yield doc, number


def _is_normalized(path: Path, text: str) -> bool:
    """Normalized event lines carry one of our `type` tags; provider payloads never do."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            doc = _decode_json(path, line, number)
            return isinstance(doc, dict) and doc.get("type") in EVENT_TAGS
    return False  # no line at all: a provider stream that ended before its first payload


def _need_provider(path: Path, provider: str | None) -> str:
    if provider is None:
        raise TranscriptError(f"{path}: --provider is required for provider transcripts")
    return provider


def _json_lines(path: Path, text: str) -> list[Any]:
    payloads = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            payloads.append(_decode_json(path, line, number))
    return payloads


def _decode_json(path: Path, text: str | bytes, line: int | None) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        where = f"{path}:{line}" if line is not None else str(path)
        raise TranscriptError(f"{where}: malformed JSON: {exc}") from None


def _json_file(
    path: Path, raw: bytes, ctx: AttemptContext, provider: str | None, first_seq: int
) -> list[Located]:
    """An HTTP error response, or provider payloads (one object or a list of them); a body that
    is not whole JSON (a JSON-array stream cut short) is read off the wire like a `.sse` file."""
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        adapter = _make_adapter(_need_provider(path, provider), ctx, first_seq + 1)
        return [(e, None) for e in [*adapter.feed_bytes(raw), *adapter.close()]]
    if isinstance(doc, dict) and "status_code" in doc:
        return _http_response(doc, ctx, provider, first_seq)
    if isinstance(doc, dict) and "error" in doc and "type" not in doc:
        return _http_response({"status_code": None, "body": doc}, ctx, provider, first_seq)
    adapter = _make_adapter(_need_provider(path, provider), ctx, first_seq + 1)
    payloads = doc if isinstance(doc, list) else [doc]
    events = [e for p in payloads for e in adapter.feed_payload(p)]
    return [(e, None) for e in [*events, *adapter.close()]]


def _http_response(
    doc: dict[str, Any], ctx: AttemptContext, provider: str | None, first_seq: int
) -> list[Located]:
    """An error status or bare error body becomes a stream error; a success with a JSON object
    body is that one payload; a response with neither is an attempt cut at once."""
    headers = {str(k).lower(): str(v) for k, v in (doc.get("headers") or {}).items()}
    stamped = msgspec.structs.replace(ctx, ts_ms=parse_instant_ms(headers.get("date", "")) or 0)
    status = doc.get("status_code")
    body = doc.get("body")
    if (status is None and body is not None) or (isinstance(status, int) and status >= 400):
        error = http_error_event(stamped, first_seq + 1, status, headers, body)
        return [(error, None)]
    adapter = _make_adapter(provider or "anthropic", stamped, first_seq + 1)
    # A success with a JSON body is the whole (non-streamed) response: its one payload.
    events = adapter.feed_payload(body) if isinstance(body, dict) and provider else []
    return [(e, None) for e in [*events, *adapter.close()]]


def _normalized(path: Path, text: str, ctx: AttemptContext, first_seq: int) -> list[Located]:
    """Normalized events, restamped with the attempt's identity and contiguous seqs."""
    located: list[Located] = []
    seq = first_seq + 1
    for doc, number in _objects(path, text):
        leading_start = not located and doc.get("type") == "attempt-started"
        located.append(_stamped(path, doc, number, ctx, first_seq if leading_start else seq))
        seq += 0 if leading_start else 1
    return located


def _stamped(path: Path, doc: dict[str, Any], line: int, ctx: AttemptContext, seq: int) -> Located:
    """The event of `doc` with the attempt's identity and `seq`."""
    identity = (ctx.session_id, ctx.turn_id, ctx.step, ctx.attempt, seq)
    doc.update(zip(_IDENTITY, identity, strict=True))
    return _convert(path, doc, line), line


def _convert(path: Path, doc: dict[str, Any], line: int) -> InboundEvent:
    try:
        event: InboundEvent = msgspec.convert(doc, InboundEvent)
    except msgspec.ValidationError as exc:
        raise TranscriptError(f"{path}:{line}: {exc}") from None
    return event
