"""The size limit: an event of up to `MAX_EVENT_BYTES` bytes decodes; a larger payload is
`EventTooLarge` before it is parsed, measured in bytes, not characters."""

from __future__ import annotations

import pytest

from terminus.events.codec import (
    MAX_EVENT_BYTES,
    CodecError,
    EventTooLarge,
    decode_event,
    encode_event,
)
from terminus.events.inbound import TextDelta


def _delta_of_size(size: int) -> bytes:
    """A valid text-delta event of exactly `size` bytes."""
    empty = encode_event(TextDelta(session_id="s", turn_id="t", seq=1, part_id="p", delta=""))
    return encode_event(
        TextDelta(session_id="s", turn_id="t", seq=1, part_id="p", delta="x" * (size - len(empty)))
    )


def test_event_at_the_size_limit_decodes() -> None:
    raw = _delta_of_size(MAX_EVENT_BYTES)
    assert len(raw) == MAX_EVENT_BYTES
    assert isinstance(decode_event(raw), TextDelta)


@pytest.mark.parametrize("fmt", ["json", "msgpack"])
def test_oversize_payload_is_too_large_and_never_parsed(fmt: str) -> None:
    oversize = _delta_of_size(MAX_EVENT_BYTES + 1)
    garbage = b"\xc1" * (MAX_EVENT_BYTES + 1)  # would be a decode error if it were parsed
    for raw in (oversize, garbage):
        with pytest.raises(EventTooLarge) as caught:
            decode_event(raw, "json" if fmt == "json" else "msgpack")
        assert caught.value.field == "$"
        assert str(MAX_EVENT_BYTES) in str(caught.value)
        assert isinstance(caught.value, CodecError)


def test_oversize_text_payload_is_measured_in_bytes() -> None:
    # 400,000 check marks are 1.2 MB of UTF-8 but only 400,000 characters.
    delta = "\u2713" * 400_000
    raw = encode_event(TextDelta(session_id="s", turn_id="t", seq=1, part_id="p", delta=delta))
    assert len(raw) > MAX_EVENT_BYTES
    with pytest.raises(EventTooLarge):
        decode_event(raw)
    with pytest.raises(EventTooLarge):
        decode_event(raw.decode())
