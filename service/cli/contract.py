"""`terminus contract [--out DIR] [--check]`: write the contract documents generated from the
code (JSON Schema, AsyncAPI, OpenAPI; service/contract/) into `docs/contract`, or with `--check`
exit 1 naming those the committed files lack."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from terminus.service.cli.common import Subparsers
from terminus.service.contract import drift, write

DEFAULT_DIR = Path("docs") / "contract"


def _contract(args: argparse.Namespace) -> int:
    if args.check:
        stale = drift(args.out)
        for name in stale:
            print(f"terminus contract: {args.out / name} differs from the code", file=sys.stderr)
        if stale:
            print(
                "terminus contract: run `terminus contract` and commit the result", file=sys.stderr
            )
        return 1 if stale else 0
    for name in write(args.out):
        print(args.out / name)
    return 0


def add_contract_command(sub: Subparsers) -> None:
    cmd = sub.add_parser(
        "contract",
        help="write the JSON Schema, AsyncAPI and OpenAPI documents",
        description="Generate the published contract from the code: a JSON Schema of every "
        "inbound event, frame, command and record, an AsyncAPI 3 document of the streams and "
        "an OpenAPI 3.1 document of the gateway.",
    )
    cmd.add_argument("--out", type=Path, default=DEFAULT_DIR, help=f"default {DEFAULT_DIR}")
    cmd.add_argument("--check", action="store_true", help="exit 1 if the files differ")
    cmd.set_defaults(handler=_contract)
