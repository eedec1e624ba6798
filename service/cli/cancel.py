"""`terminus cancel --session S TURN`: end a live turn now, as a user's Stop does (the gateway's
`POST /v1/sessions/{id}/turns/{turn}/cancel`). Exit status 0 once the cancel is published, 1 for
a turn that is unknown or has ended already."""

from __future__ import annotations

import argparse
import json

from redis.asyncio import Redis

from terminus.service.cli.common import CommandError, Subparsers, handler
from terminus.service.gateway.cancel import request_cancel
from terminus.service.settings import Settings


async def _cancel(redis: Redis, settings: Settings, args: argparse.Namespace) -> int:
    answer = await request_cancel(redis, settings, args.session, args.turn, args.reason)
    if answer.status != 202:
        raise CommandError(f"turn {args.turn}: {json.dumps(answer.body)}")
    print(json.dumps({"turn_id": args.turn, **answer.body}))
    return 0


def add_cancel_command(sub: Subparsers) -> None:
    cancel = sub.add_parser(
        "cancel",
        help="cancel a live turn",
        description="End a live turn now: its open attempt is discarded, its subscribers told, "
        "and its producer's runner stops the provider request.",
    )
    cancel.add_argument("turn", metavar="TURN", help="the turn's id")
    cancel.add_argument("--session", required=True, help="the turn's session id")
    cancel.add_argument("--reason", default="cancelled", help="recorded with the cancel")
    cancel.set_defaults(handler=handler(_cancel))
