"""The pump's RESP packer (service/redis/resp.py) writes what redis-py's own packer writes, for
every argument a pump sends, and refuses what redis-py refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from terminus.service.redis.resp import pack_commands

# A command's name, then its arguments: what the pump's rounds, waits and WAITs carry.
argument = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=100),
    st.integers(min_value=-(2**63), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
)
command = st.tuples(st.sampled_from(["EVALSHA", "XREAD", "WAIT", "PING"])).flatmap(
    lambda name: st.lists(argument, max_size=12).map(lambda args: (*name, *args))
)


@given(st.lists(command, min_size=1, max_size=5))
def test_as_redis_py_packs_them(commands: list[tuple[bytes | str | int | float, ...]]) -> None:
    theirs = Connection().pack_commands(commands)
    assert pack_commands(commands) == b"".join(theirs)


@pytest.mark.parametrize("wrong", [True, None, object(), ["a list"]])
def test_what_redis_py_refuses_is_refused(wrong: object) -> None:
    with pytest.raises(DataError):
        pack_commands([("PING", wrong)])
