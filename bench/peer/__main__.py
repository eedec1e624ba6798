"""`python -m bench.peer`: the peer (bench/peer/app.py) until SIGTERM, on the worker's settings."""

from __future__ import annotations

import asyncio
import os

from bench.peer.app import build


def main() -> None:
    app = build(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        os.environ.get("TERMINUS_PREFIX", "terminus"),
        int(os.environ.get("TERMINUS_PARTITIONS", "16")),
    )
    asyncio.run(app.run())


if __name__ == "__main__":
    main()
