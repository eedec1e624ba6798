"""Decode errors: a payload of the wrong shape, in JSON or MessagePack, is an `EventDecodeError`
naming the field at fault, and hostile bytes are a `CodecError` and nothing else."""

from __future__ import annotations

from typing import Any, Final

import msgspec
import pytest

from terminus.events.codec import CodecError, EventDecodeError, decode_event

EVENT_FIELDS: Final = b'"session_id":"s","turn_id":"t"'


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        pytest.param(
            b'{"type":"text-delta",' + EVENT_FIELDS + b',"seq":"5","part_id":"p","delta":"d"}',
            "$.seq",
            "Expected `int`",
            id="wrong-type-seq",
        ),
        pytest.param(
            b'{"type":"text-delta",' + EVENT_FIELDS + b',"seq":5,"part_id":7,"delta":"d"}',
            "$.part_id",
            "Expected `str`",
            id="wrong-type-part-id",
        ),
        pytest.param(
            b'{"type":"finish-step",'
            + EVENT_FIELDS
            + b',"seq":5,"finish_reason":"stop","usage":{"output_tokens":"many"}}',
            "$.usage.output_tokens",
            "Expected `int`",
            id="wrong-type-nested",
        ),
        pytest.param(
            b'{"type":"finish-step",' + EVENT_FIELDS + b',"seq":5,"finish_reason":"done"}',
            "$.finish_reason",
            "'done'",
            id="unknown-finish-reason",
        ),
        pytest.param(
            b'{"type":"text-shout",' + EVENT_FIELDS + b',"seq":5}',
            "$.type",
            "'text-shout'",
            id="unknown-type",
        ),
        pytest.param(
            b'{"type":"text-delta",' + EVENT_FIELDS + b',"seq":5,"delta":"d"}',
            "$.part_id",
            "missing required field `part_id`",
            id="missing-part-id",
        ),
        pytest.param(
            b'{"type":"text-end",' + EVENT_FIELDS + b',"part_id":"p"}',
            "$.seq",
            "missing required field `seq`",
            id="missing-seq",
        ),
        pytest.param(
            b"{" + EVENT_FIELDS + b',"seq":5}',
            "$.type",
            "missing required field `type`",
            id="missing-type",
        ),
        pytest.param(b'{"type":"text-delta",', "$", "malformed json", id="truncated-json"),
        pytest.param(b"{not json}", "$", "malformed json", id="malformed-json"),
        pytest.param(b"[1, 2]", "$", "Expected `object`", id="not-an-object"),
    ],
)
def test_json_decode_errors_name_the_field(raw: bytes, field: str, words: str) -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(raw, "json")
    assert caught.value.field == field
    assert words in str(caught.value)
    leaf = field.rsplit(".", 1)[-1]
    assert field == "$" or f"`{leaf}`" in str(caught.value) or field in str(caught.value)
    assert isinstance(caught.value, CodecError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (
            {"type": "text-end", "session_id": "s", "turn_id": "t", "seq": 1.5, "part_id": "p"},
            "$.seq",
        ),
        ({"type": "nope", "session_id": "s", "turn_id": "t", "seq": 1}, "$.type"),
        ({"type": "text-end", "session_id": "s", "turn_id": "t", "seq": 1}, "$.part_id"),
    ],
)
def test_msgpack_decode_errors_name_the_field(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(msgspec.msgpack.encode(payload), "msgpack")
    assert caught.value.field == field


def test_malformed_msgpack_is_a_decode_error_at_the_root() -> None:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(b"\xc1", "msgpack")
    assert caught.value.field == "$"
    assert "malformed msgpack" in str(caught.value)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type":"text-delta","session_id":"s\xff","turn_id":"t","seq":1,"part_id":"p","delta":"x"}',
        b'{"type":"text-end","session_id":"s","turn_id":"t","seq":1,"part_id":"p","x":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        b'{"type":"turn-started","session_id":"s","turn_id":"t","seq":0,"max_attempts":1'
        + b"0" * 30
        + b"}",
    ],
    ids=["not-utf8", "deep-nesting", "integer-out-of-range"],
)
def test_hostile_bytes_are_a_codec_error_and_nothing_else(raw: bytes) -> None:
    with pytest.raises(CodecError):
        decode_event(raw)
