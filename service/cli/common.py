"""What every `terminus` command that reads Redis shares: its settings and client, and one
line on stderr with exit status 1 for an expected failure (a bad setting, an unreachable Redis,
a bad input, a `TERMINUS_PARTITIONS` the deployment's recorded shape disagrees with).

Each command works with the deployment's recorded partition count (service/shape.py): it
follows it when `TERMINUS_PARTITIONS` is unset, and refuses to run when it is set otherwise."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError as RedisResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from terminus.service import TerminusError
from terminus.service.redis.connect import client
from terminus.service.sdk.updates import Interrupted, SubscriberError
from terminus.service.settings import Settings, SettingsError
from terminus.service.settings import from_env as settings_from_env
from terminus.service.shape import ShapeError, settled

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Body = Callable[[Redis, Settings, argparse.Namespace], Awaitable[int]]


class CommandError(TerminusError):
    """A user-facing failure; `str()` is the one line printed."""


def _run(body: Body, args: argparse.Namespace) -> int:
    """Run `body` with a client; expected failures become one stderr line and status 1."""
    name = f"terminus {args.command}"
    try:
        settings = settings_from_env(os.environ)
        return asyncio.run(_connected(body, settings, args))
    except (SettingsError, CommandError, SubscriberError, ShapeError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
    except (RedisConnectionError, RedisTimeoutError, Interrupted) as exc:
        print(f"{name}: cannot reach Redis: {_one_line(exc)}", file=sys.stderr)
    except RedisResponseError as exc:  # e.g. an ACL without a command, a log no XADD can extend
        print(f"{name}: Redis refused: {_one_line(exc)}", file=sys.stderr)
    except KeyboardInterrupt:
        # Ctrl-C is how `--follow` is meant to end.
        return 0 if getattr(args, "follow", False) else 130
    return 1


async def _connected(body: Body, settings: Settings, args: argparse.Namespace) -> int:
    async with client(settings) as redis:
        return await body(redis, await settled(redis, settings), args)


def handler(body: Body) -> Callable[[argparse.Namespace], int]:
    return lambda args: _run(body, args)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
