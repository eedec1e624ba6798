"""`terminus call`: the turn runner on the command line, against a provider's HTTP API.

    terminus call --provider anthropic --session S --turn T request.json
    echo '{"model": ..., "messages": [...]}' | terminus call --provider anthropic --session S -

Reads the request body, a JSON object, from the file, or from standard input when the file is
`-` (its `model` is the default of `--model`; `stream` is the call's own), runs the turn through
the workers, and prints each frame of the turn as a JSON line as it is committed. Exit status 0
on a finished turn (the persisted message is the last line), 1 on a failed, cancelled or refused
one (refused: the turn id is another session's turn); the error is then the last line, as
`{"error": ...}`. The API key comes from the environment variable `--api-key-env` names (by
default the provider's usual one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec
from redis.asyncio import Redis

from terminus.events.codec import encode_json
from terminus.service.cli.common import CommandError, Subparsers, handler
from terminus.service.keys import keys_for_session
from terminus.service.redis.replies import last_id
from terminus.service.sdk import callers
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnCancelled, TurnFailed, TurnRefused, TurnRunner
from terminus.service.sdk.views import follow_updates
from terminus.service.settings import Settings

Maker = Callable[..., callers.HttpCall]

CALLS: Final[dict[str, tuple[Maker, str]]] = {
    "anthropic": (callers.anthropic, "ANTHROPIC_API_KEY"),
    "openai-responses": (callers.openai_responses, "OPENAI_API_KEY"),
    "openai-chat": (callers.openai_chat, "OPENAI_API_KEY"),
    "gemini": (callers.gemini, "GEMINI_API_KEY"),
}


def add_call_command(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "call",
        help="run one turn against a provider's HTTP API, through the workers",
        description="Run one turn with the producer SDK's turn runner: each attempt is a "
        "streaming request to the provider; retries, waits and the end are the workers' "
        "decisions. Prints every frame of the turn as a JSON line.",
    )
    cmd.add_argument(
        "request",
        metavar="REQUEST",
        help="a file holding the request body as a JSON object, or - to read it from stdin",
    )
    cmd.add_argument("--provider", required=True, choices=sorted(CALLS))
    cmd.add_argument("--model", help="the model (default: the request's `model`)")
    cmd.add_argument("--base-url", help="the API's base URL (default: the provider's)")
    cmd.add_argument("--api-key-env", metavar="NAME", help="environment variable of the key")
    cmd.add_argument("--session", required=True, metavar="S", help="session id")
    cmd.add_argument("--turn", metavar="T", help="turn id (default: a new random one)")
    cmd.add_argument("--max-attempts", type=int, help="this turn's cap on attempts per step")
    cmd.set_defaults(handler=handler(_run))


def _request(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    name = "stdin" if args.request == "-" else args.request
    try:
        raw = sys.stdin.buffer.read() if args.request == "-" else Path(args.request).read_bytes()
        body = msgspec.json.decode(raw)
    except (OSError, msgspec.DecodeError) as exc:
        raise CommandError(f"{name}: {exc}") from None
    if not isinstance(body, dict):
        raise CommandError(f"{name}: the request body must be a JSON object")
    model = args.model or body.pop("model", None)
    if not isinstance(model, str) or not model:
        raise CommandError("no model: pass --model or put `model` in the request")
    body.pop("stream", None)
    return body, model


def _call(args: argparse.Namespace) -> callers.HttpCall:
    body, model = _request(args)
    make, key_env = CALLS[args.provider]
    api_key = os.environ.get(args.api_key_env or key_env, "")
    if not api_key:
        raise CommandError(f"no API key: set {args.api_key_env or key_env}")
    options = {"base_url": args.base_url} if args.base_url else {}
    return make(api_key, model, body, **options)


async def _run(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    call = _call(args)
    turn_id: str = args.turn or uuid.uuid4().hex
    key = keys_for_session(args.session, settings.partitions, settings.prefix)
    start = await last_id(redis, key.session(args.session))
    printer = asyncio.create_task(_print_frames(redis, settings, args.session, turn_id, start))
    printer.add_done_callback(_seen)
    runner = TurnRunner(Producer.from_settings(redis, settings))
    try:
        message = await runner.run_turn(args.session, turn_id, call, max_attempts=args.max_attempts)
    except TurnFailed as failed:
        return await _last(printer, {"error": failed.error}, 1)
    except TurnCancelled as cancelled:
        return await _last(
            printer, {"error": {"type": "cancelled", "turn_id": cancelled.turn_id}}, 1
        )
    except TurnRefused as refused:  # no frame of it will come: no wait for one
        error = {"type": "refused", "turn_id": refused.turn_id, "reason": refused.reason}
        return await _last(printer, {"error": error}, 1, wait_s=0)
    finally:
        await runner.close()
    return await _last(printer, message, 0)


async def _print_frames(
    redis: Redis, settings: Settings, session: str, turn_id: str, start: str
) -> None:
    frames = follow_updates(
        redis, session, after=start, partitions=settings.partitions, prefix=settings.prefix
    )
    async for frame in frames:
        if frame.turn_id == turn_id:
            _line(encode_json(frame))
            if type(frame).__name__ in ("TurnFinished", "AgentError"):
                return


async def _last(printer: asyncio.Task[None], last: object, status: int, wait_s: float = 5) -> int:
    """Let the frames of the turn be printed to its last one, then print `last`."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(printer), wait_s)
    printer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await printer
    _line(msgspec.json.encode(last))
    return status


def _seen(printer: asyncio.Task[None]) -> None:
    """Mark the printer's failure as seen: after Ctrl-C the client closes under it, and asyncio
    would print that failure's traceback as never retrieved (issue 30). Awaited, it still
    raises."""
    if not printer.cancelled():
        printer.exception()


def _line(raw: bytes) -> None:
    sys.stdout.buffer.write(raw + b"\n")
    sys.stdout.flush()
