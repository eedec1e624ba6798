"""The blackhole proxy of the fault tests in a child process, so that forwarding every worker's
traffic does not compete with the soak's own event loop (load, reader, checks).

    python -m bench.soak.proxy UPSTREAM_PORT

prints its own port on the first line of stdout, then serves one command per line of stdin:
`blackhole SECONDS` answers `ok` once the connections flow again. EOF on stdin ends it.
"""

from __future__ import annotations

import asyncio
import sys

from tests.support.faults.proxy import BlackholeProxy


async def serve(upstream_port: int) -> None:
    """Proxy to `upstream_port` and obey stdin until it closes."""
    async with BlackholeProxy(upstream_port) as hole:
        print(hole.port, flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command, _, argument = line.strip().partition(" ")
            if command == "blackhole":
                await hole.blackhole(float(argument))
            print("ok", flush=True)


def main() -> None:
    """python -m bench.soak.proxy UPSTREAM_PORT"""
    asyncio.run(serve(int(sys.argv[1])))


if __name__ == "__main__":
    main()
