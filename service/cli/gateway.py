"""`terminus gateway` (the HTTP gateway alone) and `terminus token` (mint an access token)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Final

DEFAULT_HTTP: Final = "127.0.0.1:8080"
DEFAULT_TTL_S: Final = 3600
MAX_TTL_S: Final = 365 * 24 * 3600  # a longer-lived credential is a key: rotate keys instead
KEYS_HELP: Final = (
    "the token keys: TERMINUS_TOKEN_SECRETS, else TERMINUS_TOKEN_KEYS_FILE, else "
    "TERMINUS_TOKEN_SECRET, else the file token-keys in the state directory (TERMINUS_STATE_DIR, "
    "else $XDG_STATE_HOME/terminus, else ~/.local/state/terminus), made on first use and "
    "announced on stderr; never the working directory"
)


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (argparse type)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def ttl_seconds(text: str) -> int:
    """`--ttl`: whole seconds from 1 to MAX_TTL_S (argparse type). A token minted with 0, a
    negative or a 14-digit lifetime was printed, then refused by every gateway."""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text[:12]) <= MAX_TTL_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of seconds from 1 to {MAX_TTL_S} (a year)"
        )
    return int(text)


def _gateway(args: argparse.Namespace) -> int:
    from terminus.service.cli.loop import run
    from terminus.service.gateway.serve import serve_gateway
    from terminus.service.gateway.tokens import TokenError, local_keyring
    from terminus.service.settings import SettingsError, from_env
    from terminus.service.shape import ShapeError

    try:
        settings = from_env(os.environ)
        secret = local_keyring(os.environ)
    except (SettingsError, TokenError) as exc:
        raise SystemExit(f"terminus gateway: {exc}") from None
    host, port = args.http
    try:
        run(serve_gateway(settings, secret, host, port))
    except ShapeError as exc:
        raise SystemExit(f"terminus gateway: {exc}") from None
    return 0


def _token(args: argparse.Namespace) -> int:
    from terminus.service.gateway.tokens import TokenError, local_keyring, mint

    if (args.session is None) == (not args.admin):
        raise SystemExit("terminus token: give a SESSION or --admin (not both)")
    try:
        secret = local_keyring(os.environ)
    except TokenError as exc:
        raise SystemExit(f"terminus token: {exc}") from None
    sys.stdout.write(mint(secret, args.session, int(time.time()) + args.ttl) + "\n")
    return 0


def add_gateway_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gateway = sub.add_parser(
        "gateway",
        help="the HTTP gateway alone: session updates over SSE, messages, turns, health",
        description="Serves the ASGI app of service/gateway/routes.py with uvicorn. Tokens are "
        f"checked against {KEYS_HELP}.",
    )
    gateway.add_argument(
        "--http",
        type=host_port,
        default=host_port(DEFAULT_HTTP),
        metavar="HOST:PORT",
        help=f"where to listen (default {DEFAULT_HTTP})",
    )
    gateway.set_defaults(handler=_gateway)
    token = sub.add_parser(
        "token",
        help="mint an access token for one session (or --admin) and print it",
        description=f"Signed with the current key of {KEYS_HELP}, as the gateway checks it.",
    )
    token.add_argument("session", nargs="?", default=None, metavar="SESSION")
    token.add_argument("--admin", action="store_true", help="an operator token")
    token.add_argument(
        "--ttl",
        type=ttl_seconds,
        default=DEFAULT_TTL_S,
        metavar="S",
        help=f"seconds the token lives, 1 to {MAX_TTL_S} (a year; default {DEFAULT_TTL_S})",
    )
    token.set_defaults(handler=_token)
