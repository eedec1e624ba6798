"""Schema evolution of the inbound contract (docs/schema.md): versions, upcasters, refusals.

The v1 -> v2 example is hypothetical: a `Schema` whose current version is 2, as if today's layout
had been reached through one breaking change. Its version-1 `text-delta` carried `text` instead of
`delta`, and its `finish-step` usage counted `prompt_tokens` and `completion_tokens`; the upcaster
moves both into the current layout, which the typed decoder then reads.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from terminus.events.codec import (
    CodecError,
    EventDecodeError,
    Format,
    UnsupportedVersion,
    decode_event,
    encode_event,
)
from terminus.events.inbound import EVENT_TYPES, FinishStep, InboundEvent, TextDelta, TextEnd, Usage
from terminus.events.versions import CURRENT, DEFAULT, Document, NewerVersion, Schema, VersionError
from terminus.service.fold.applier import Entry, decode_entries

FORMATS: Final[tuple[Format, ...]] = ("json", "msgpack")
IDS: Final[Document] = {"session_id": "s", "turn_id": "t", "seq": 4}
_USAGE_V1: Final = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens"}


def v1_to_v2(doc: Document) -> Document:
    """Version 1 named a delta's text `text` and counted usage the OpenAI way."""
    if doc.get("type") == "text-delta" and "text" in doc:
        doc["delta"] = doc.pop("text")
    usage = doc.get("usage")
    if doc.get("type") == "finish-step" and isinstance(usage, dict):
        doc["usage"] = {_USAGE_V1.get(k, k): n for k, n in usage.items()}
    return doc


V2: Final = Schema(current=2, upcasters={1: v1_to_v2})


def wire(doc: Document, fmt: Format) -> bytes:
    return msgspec.json.encode(doc) if fmt == "json" else msgspec.msgpack.encode(doc)


def legacy(event: InboundEvent) -> Document:
    """The version-1 document a producer of the hypothetical contract wrote for `event`."""
    doc: Document = msgspec.to_builtins(event)
    doc["v"] = 1
    if isinstance(event, TextDelta):
        doc["text"] = doc.pop("delta")
    if isinstance(event, FinishStep):
        inverse = {new: old for old, new in _USAGE_V1.items()}
        doc["usage"] = {inverse.get(k, k): n for k, n in doc["usage"].items()}
    return doc


# --- the v1 -> v2 example ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_v1_text_delta_is_upcast_to_the_current_layout(fmt: Format) -> None:
    doc = {"type": "text-delta", "v": 1, **IDS, "part_id": "p", "text": "hello"}
    event = decode_event(wire(doc, fmt), fmt, V2)
    assert event == TextDelta(v=2, **IDS, part_id="p", delta="hello")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_v1_finish_step_has_its_usage_renamed(fmt: Format) -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 34, "reasoning_tokens": 5}
    doc = {"type": "finish-step", "v": 1, **IDS, "finish_reason": "stop", "usage": usage}
    event = decode_event(wire(doc, fmt), fmt, V2)
    expected = Usage(input_tokens=12, output_tokens=34, reasoning_tokens=5)
    assert event == FinishStep(v=2, **IDS, finish_reason="stop", usage=expected)


def test_a_document_without_v_is_version_1() -> None:
    doc = {"type": "text-delta", **IDS, "part_id": "p", "text": "old producer"}
    assert decode_event(wire(doc, "json"), "json", V2) == TextDelta(
        v=2, **IDS, part_id="p", delta="old producer"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_v2_documents_decode_directly_without_the_upcaster(fmt: Format) -> None:
    calls: list[Document] = []

    def counting(doc: Document) -> Document:
        calls.append(doc)
        return v1_to_v2(doc)

    schema = Schema(current=2, upcasters={1: counting})
    current = TextDelta(v=2, **IDS, part_id="p", delta="new")
    assert decode_event(encode_event(current, fmt), fmt, schema) == current
    assert calls == []
    decode_event(wire(legacy(current), fmt), fmt, schema)
    assert len(calls) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_v1_document_invalid_after_upcasting_names_its_field(fmt: Format) -> None:
    doc = {"type": "text-delta", "v": 1, **IDS, "part_id": 7, "text": "x"}
    with pytest.raises(EventDecodeError) as caught:
        decode_event(wire(doc, fmt), fmt, V2)
    assert caught.value.field == "$.part_id"
    assert "Expected `str`" in caught.value.reason


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_newer_version_is_refused_with_the_upgrade_order(fmt: Format) -> None:
    doc = {"type": "text-delta", "v": 3, **IDS, "part_id": "p", "delta": "d", "tone": "calm"}
    with pytest.raises(UnsupportedVersion) as caught:
        decode_event(wire(doc, fmt), fmt, V2)
    assert caught.value.field == "$.v"
    assert caught.value.reason == (
        "event version 3 is newer than this build reads: upgrade the workers before the producers"
    )
    assert isinstance(caught.value, CodecError)


def test_a_newer_version_is_refused_for_its_version_not_its_unknown_fields() -> None:
    # A future contract may add types this build has never heard of: the version is the news.
    doc = {"type": "image-delta", "v": 2, **IDS, "part_id": "p", "data": "..."}
    with pytest.raises(UnsupportedVersion, match="event version 2 is newer"):
        decode_event(wire(doc, "json"))


def test_a_schema_missing_an_upcaster_fails_when_it_is_built() -> None:
    with pytest.raises(ValueError, match=r"schema version 2 has no upcaster for 1 -> 2"):
        Schema(current=2)
    with pytest.raises(ValueError, match=r"no upcaster for 2 -> 3, 3 -> 4$"):
        Schema(current=4, upcasters={1: v1_to_v2})
    with pytest.raises(ValueError, match="below the first"):
        Schema(current=0)


def test_upcasters_run_step_by_step_each_seeing_its_own_version() -> None:
    seen: list[tuple[int, str]] = []

    def step(n: int) -> Any:
        def upcast(doc: Document) -> Document:
            seen.append((doc["v"], doc["delta"]))
            return {**doc, "delta": doc["delta"] + str(n)}

        return upcast

    schema = Schema(current=3, upcasters={1: step(1), 2: step(2)})
    doc = {"type": "text-delta", "v": 1, **IDS, "part_id": "p", "delta": "x"}
    assert decode_event(wire(doc, "json"), "json", schema) == TextDelta(
        v=3, **IDS, part_id="p", delta="x12"
    )
    assert seen == [(1, "x"), (2, "x1")]
    assert schema.upcast({**doc, "v": 2})["delta"] == "x2"


# --- the production contract -------------------------------------------------------------------


def test_the_production_contract_is_version_1_with_no_upcasters() -> None:
    assert (CURRENT, DEFAULT.current, dict(DEFAULT.upcasters)) == (1, 1, {})
    # Producers stamp the version they build with: the struct default moves with CURRENT.
    assert TextEnd(**IDS, part_id="p").v == CURRENT


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("version", "shown"),
    [(0, "0"), (-1, "-1"), ("2", '"2"'), (True, "true"), (1.5, "1.5"), (None, "null")],
)
def test_a_version_that_is_not_a_positive_int_is_a_decode_error_at_v(
    fmt: Format, version: object, shown: str
) -> None:
    doc = {"type": "text-end", "v": version, **IDS, "part_id": "p"}
    with pytest.raises(EventDecodeError) as caught:
        decode_event(wire(doc, fmt), fmt)
    assert caught.value.field == "$.v"
    assert caught.value.reason == f"event version must be an integer from 1 up, got {shown}"
    assert not isinstance(caught.value, UnsupportedVersion)


def test_version_errors_carry_the_versions() -> None:
    with pytest.raises(NewerVersion) as caught:
        DEFAULT.upcast({"v": 7})
    assert (caught.value.version, caught.value.current, caught.value.field) == (7, 1, "$.v")
    with pytest.raises(VersionError):
        DEFAULT.upcast({"v": "seven"})


def test_the_worker_dead_letters_a_future_version_with_the_reason() -> None:
    raw = wire({"type": "text-end", "v": 2, **IDS, "part_id": "p"}, "msgpack")
    [decoded] = decode_entries([Entry("1-0", {b"e": raw})], max_deliveries=5)
    assert decoded.event is None
    assert decoded.raw == raw
    assert decoded.problem == (
        "undecodable: event version 2 is newer than this build reads: "
        "upgrade the workers before the producers"
    )


# --- properties --------------------------------------------------------------------------------

_TEXT: Final = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_INT: Final = st.integers(-(2**63), 2**63 - 1)
_JSON: Final = st.recursive(
    st.none() | st.booleans() | _INT | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


_SCALARS: Final[dict[type[msgspec.inspect.Type], st.SearchStrategy[Any]]] = {
    msgspec.inspect.IntType: _INT,
    msgspec.inspect.StrType: _TEXT,
    msgspec.inspect.BoolType: st.booleans(),
    msgspec.inspect.NoneType: st.none(),
    msgspec.inspect.AnyType: _JSON,
}


def values(kind: msgspec.inspect.Type) -> st.SearchStrategy[Any]:
    """Any valid value of a field type, read from the contract itself (new fields included)."""
    if isinstance(kind, msgspec.inspect.IntType):  # within the contract's bounds, if it has any
        low = -(2**63) if kind.ge is None else kind.ge
        high = 2**63 - 1 if kind.le is None else kind.le
        return st.integers(low, high)
    if type(kind) in _SCALARS:
        return _SCALARS[type(kind)]
    match kind:
        case msgspec.inspect.LiteralType(values=choices):
            return st.sampled_from(choices)
        case msgspec.inspect.UnionType(types=types):
            return st.one_of([values(t) for t in types])
        case msgspec.inspect.DictType(value_type=value_type):
            return st.dictionaries(_TEXT, values(value_type), max_size=3)
        case msgspec.inspect.StructType(cls=cls):
            return structs(cls)
    raise AssertionError(f"no strategy for {kind}")


def structs(cls: type[Any]) -> st.SearchStrategy[Any]:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    fields = {f.name: values(f.type) for f in info.fields if f.name != "v"}
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


events: Final[st.SearchStrategy[InboundEvent]] = st.one_of([structs(t) for t in EVENT_TYPES])


@given(events, st.sampled_from(FORMATS))
def test_every_valid_event_roundtrips_through_the_default_schema(
    event: InboundEvent, fmt: Format
) -> None:
    assert decode_event(encode_event(event, fmt), fmt) == event


@given(events, st.sampled_from(FORMATS))
def test_every_legacy_v1_event_upcasts_to_its_v2_self(event: InboundEvent, fmt: Format) -> None:
    upcast = decode_event(wire(legacy(event), fmt), fmt, V2)
    assert upcast == msgspec.structs.replace(event, v=2)
