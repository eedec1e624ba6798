"""The Lua scripts of service/redis/lua, read from the package and registered once per client.

`register_script` computes the SHA once; each call is an EVALSHA that falls back to SCRIPT LOAD
when the server does not know the script yet (a restart, a failover). Scripts use only
EVAL-era features, so they run on Redis 6.2 as on 7. Redis cannot share code between scripts,
so a line `--!include NAME` is replaced by the text of `service/redis/lua/NAME.lua` when loading.
"""

from __future__ import annotations

import hashlib
import weakref
from functools import cache
from importlib.resources import files
from typing import Final

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

_registered: weakref.WeakKeyDictionary[Redis, dict[str, AsyncScript]] = weakref.WeakKeyDictionary()


INCLUDE: Final = "--!include "


@cache
def source(name: str) -> str:
    """The text of `service/redis/lua/<name>.lua`, its includes expanded."""
    text = (
        files("terminus.service.redis").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")
    )
    lines = text.splitlines(keepends=True)
    return "".join(
        source(line.removeprefix(INCLUDE).strip()) if line.startswith(INCLUDE) else line
        for line in lines
    )


@cache  # once per script: a pump names one for every request it sends
def sha(name: str) -> str:
    """The SHA1 by which EVALSHA names the script `name`."""
    return hashlib.sha1(source(name).encode()).hexdigest()


def script(redis: Redis, name: str) -> AsyncScript:
    """The script `name` registered on `redis`; the same object on every later call."""
    scripts = _registered.setdefault(redis, {})
    if name not in scripts:
        scripts[name] = redis.register_script(source(name))
    return scripts[name]
