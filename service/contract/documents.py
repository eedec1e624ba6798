"""Every contract document, as the bytes of its file (sorted keys, two-space indent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from terminus.events.inbound import InboundEvent
from terminus.events.outbound import PartialRecord, PersistedMessage, ProducerCommand, SessionUpdate
from terminus.service.contract.asyncapi import asyncapi
from terminus.service.contract.openapi import OPENAPI_TYPES, openapi
from terminus.service.contract.typescript import typescript

Types = Mapping[str, Any]  # document stem -> the type it describes

JSON_SCHEMA: Final = "https://json-schema.org/draft/2020-12/schema"
TYPES: Final[Types] = {
    "inbound-event": InboundEvent,
    "frame": SessionUpdate,
    "command": ProducerCommand,
    "message": PersistedMessage,
    "partial": PartialRecord,
}
# The unions, which have no name of their own, under these names in components.schemas.
ROOT_NAMES: Final = {
    "inbound-event": "InboundEvent",
    "frame": "SessionUpdate",
    "command": "ProducerCommand",
}
TITLES: Final = {
    "inbound-event": "An event a producer appends to terminus:{p}:in (field e)",
    "frame": "A session update the workers append to terminus:{p}:session:<sid> (field e)",
    "command": "What a producer must act on, from terminus:{p}:commands (field e)",
    "message": "A persisted assistant message (terminus:{p}:messages:<sid>)",
    "partial": "A failed attempt's content, kept for inspection (terminus:{p}:partials:<sid>)",
}


def documents(types: Types | None = None) -> dict[str, bytes]:
    """File name -> contents of every contract document, made from `types` (default `TYPES`)."""
    types = TYPES if types is None else types
    made = {f"{stem}.schema.json": _schema(stem, t) for stem, t in types.items()}
    roots, components = msgspec.json.schema_components(
        [*types.values(), *OPENAPI_TYPES.values()], ref_template="#/components/schemas/{name}"
    )
    names = [*(ROOT_NAMES.get(stem, stem) for stem in types), *OPENAPI_TYPES]
    schemas = {**components, **dict(zip(names, roots, strict=True))}
    made["asyncapi.json"] = _encode(asyncapi(schemas))
    made["openapi.json"] = _encode(openapi(schemas))
    made["contract.ts"] = typescript(schemas)
    return made


def _schema(stem: str, kind: Any) -> bytes:
    schema = msgspec.json.schema(kind)
    document = {
        "$schema": JSON_SCHEMA,
        "$id": f"{stem}.schema.json",
        "title": TITLES.get(stem, stem),
        **schema,
    }
    return _encode(document)


def _encode(document: object) -> bytes:
    return msgspec.json.format(msgspec.json.encode(document, order="sorted"), indent=2) + b"\n"
