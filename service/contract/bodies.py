"""The gateway's answer bodies that have no type of their own in the code (the handlers build
them as dicts): written here as Structs so that the OpenAPI document describes them, and the
route tests (tests/integration/test_contract_routes.py) check each against a real answer."""

from __future__ import annotations

from typing import Final

import msgspec

from terminus.events.outbound import PersistedMessage
from terminus.service.gateway.timeline import Timeline, TurnSummary
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import Turn


class MessagesPage(msgspec.Struct, frozen=True):
    """`GET /v1/sessions/{id}/messages`: a page of the session's messages in commit order."""

    messages: list[PersistedMessage]
    next_offset: int | None
    total: int


class CancelAccepted(msgspec.Struct, frozen=True):
    """`POST .../cancel`: the cancel is in the turn's log, at `entry_id`."""

    cancel: str
    entry_id: str


class Problem(msgspec.Struct, frozen=True):
    """Every refusal: what is wrong, in words."""

    error: str


class CancelRefused(msgspec.Struct, frozen=True):
    """`POST .../cancel` of a turn that has ended: the refusal, and the state it ended in."""

    error: str
    state: TurnState


class AttemptPublished(msgspec.Struct, frozen=True):
    """`POST .../attempts`: the attempt is published; its decision is read on the commands
    route from `commands_from`, and the tool outcomes of its step are numbered from `next_seq`."""

    session_id: str
    turn_id: str
    step: int
    attempt: int
    next_seq: int
    commands_from: str


class EventsPublished(msgspec.Struct, frozen=True):
    """`POST .../events`: how many events were published, and the attempt's next seq."""

    published: int
    next_seq: int


class RecentTurns(msgspec.Struct, frozen=True):
    """`GET /v1/admin/turns`: the turns that changed state last, newest first."""

    turns: list[TurnSummary]


class SignedIn(msgspec.Struct, frozen=True):
    """`GET /v1/session-cookie`: whether the cookie signs this browser in; only when it does,
    whether as an operator and until when (unix seconds)."""

    signed_in: bool
    admin: bool | msgspec.UnsetType = msgspec.UNSET
    expires: int | msgspec.UnsetType = msgspec.UNSET


class Health(msgspec.Struct, frozen=True):
    """`GET /healthz`: whether Redis answers; only when it does not, the error."""

    ok: bool
    redis: str | msgspec.UnsetType = msgspec.UNSET


OPENAPI_TYPES: Final = {
    t.__name__: t
    for t in (
        MessagesPage,
        CancelAccepted,
        CancelRefused,
        AttemptPublished,
        EventsPublished,
        Problem,
        RecentTurns,
        SignedIn,
        Health,
        Turn,
        Timeline,
    )
}
