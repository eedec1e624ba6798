"""terminus: trustworthy LLM assistant turns over Redis Streams.

This is the installed top-level package (its source lives in `service/facade/`): the public SDK,
for producers (`TurnRunner` and the provider calls, `Producer`, `TurnPublisher`, and the
`PersistedMessage` a turn ends with) and frontends (`subscribe`, `LiveSession` and the two
sources), under one short name. Everything else is under `terminus.service`, `terminus.events`
and `terminus.statemachines`; `python -m terminus` is the `terminus` command line.

The names load on first use (PEP 562): `import terminus.events` runs this module first, and the
pure core must not pull Redis and asyncio in with it (tests/unit/test_purity.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from terminus.service import TerminusError
    from terminus.service.sdk.attempts import AttemptOrderError
    from terminus.service.sdk.callers import (
        HttpCall,
        anthropic,
        bedrock_converse,
        gemini,
        openai_chat,
        openai_responses,
    )
    from terminus.service.sdk.cancel import cancel_turn
    from terminus.service.sdk.gateway_source import GatewaySource
    from terminus.service.sdk.live import LivePart, LiveSession, LiveTurn
    from terminus.service.sdk.producer import Producer, TurnPublisher
    from terminus.service.sdk.runner import (
        Attempt,
        NoDecision,
        PersistedMessage,
        ToolOutcome,
        TurnCancelled,
        TurnFailed,
        TurnRunner,
    )
    from terminus.service.sdk.subscriber import Backoff, RedisSource, subscribe
    from terminus.service.sdk.subscription import Subscription
    from terminus.service.sdk.updates import (
        Interrupted,
        SourceUnavailable,
        SubscriberError,
        SubscriptionDenied,
        SubscriptionRefused,
        UnknownFrames,
        UnreadableFrame,
        Update,
    )

_HOMES: Final = {
    "terminus.service": ("TerminusError",),
    "terminus.service.sdk.gateway_source": ("GatewaySource",),
    "terminus.service.sdk.live": ("LivePart", "LiveSession", "LiveTurn"),
    "terminus.service.sdk.attempts": ("AttemptOrderError",),
    "terminus.service.sdk.callers": (
        "HttpCall",
        "anthropic",
        "bedrock_converse",
        "gemini",
        "openai_chat",
        "openai_responses",
    ),
    "terminus.service.sdk.cancel": ("cancel_turn",),
    "terminus.service.sdk.producer": ("Producer", "TurnPublisher"),
    "terminus.service.sdk.runner": (
        "Attempt",
        "NoDecision",
        "PersistedMessage",
        "ToolOutcome",
        "TurnCancelled",
        "TurnFailed",
        "TurnRunner",
    ),
    "terminus.service.sdk.subscriber": ("Backoff", "RedisSource", "subscribe"),
    "terminus.service.sdk.subscription": ("Subscription",),
    "terminus.service.sdk.updates": (
        "Interrupted",
        "SourceUnavailable",
        "SubscriberError",
        "SubscriptionDenied",
        "SubscriptionRefused",
        "UnknownFrames",
        "UnreadableFrame",
        "Update",
    ),
}
_HOME_OF: Final = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "Attempt",
    "AttemptOrderError",
    "Backoff",
    "GatewaySource",
    "HttpCall",
    "Interrupted",
    "LivePart",
    "LiveSession",
    "LiveTurn",
    "NoDecision",
    "PersistedMessage",
    "Producer",
    "RedisSource",
    "SourceUnavailable",
    "SubscriberError",
    "Subscription",
    "SubscriptionDenied",
    "SubscriptionRefused",
    "TerminusError",
    "ToolOutcome",
    "TurnCancelled",
    "TurnFailed",
    "TurnPublisher",
    "TurnRunner",
    "UnknownFrames",
    "UnreadableFrame",
    "Update",
    "anthropic",
    "bedrock_converse",
    "cancel_turn",
    "gemini",
    "openai_chat",
    "openai_responses",
    "subscribe",
]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'terminus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
