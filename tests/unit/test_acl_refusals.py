"""Redis's words for an ACL refusal, read into what to grant (service/redis/acl.py); other errors
are not refusals."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError, NoPermissionError, ResponseError

from terminus.service.redis.acl import Alarm, Refusal, refusal, user_of

CASES = [
    (
        NoPermissionError("this user has no permissions to run the 'xrange' command"),
        "the command 'xrange' (category @stream): grant +xrange",
    ),
    (
        NoPermissionError("this user has no permissions to run the 'xinfo|groups' command"),
        "the command 'xinfo|groups' (category @stream): grant +xinfo|groups",
    ),
    (
        NoPermissionError(
            "this user has no permissions to access one of the keys used as arguments"
        ),
        "a key outside its key patterns: grant ~<prefix>:*",
    ),
    (NoPermissionError("No permissions to access a key"), "a key outside its key patterns"),
    (
        NoPermissionError("this user has no permissions to access one of the channels used"),
        "a channel outside its patterns: grant &<prefix>:control",
    ),
    (
        ResponseError("The user executing the script can't run this command or subcommand script"),
        "a command one of its scripts sends",
    ),
]


@pytest.mark.parametrize(("error", "grant"), CASES)
def test_a_refusal_says_what_to_grant(error: ResponseError, grant: str) -> None:
    found = refusal(error)
    assert found is not None
    assert found.grant().startswith(grant)


@pytest.mark.parametrize(
    "error", [ResponseError("WRONGTYPE Operation"), ConnectionError("gone"), ValueError("x")]
)
def test_other_errors_are_not_refusals(error: Exception) -> None:
    assert refusal(error) is None


def test_the_user_is_read_from_the_url_never_the_password() -> None:
    assert user_of("rediss://terminus:secret@h:6380/0") == "terminus"
    assert user_of("redis://:secret@h/0") is None
    assert user_of("redis://h/0?username=app&password=secret") == "app"
    assert user_of(None) is None


def test_one_refusal_is_logged_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    alarm = Alarm("terminus", clock=lambda: now[0])
    found = Refusal("zrange", "@sortedset", "no permissions")
    for at in (1000.0, 1030.0, 1061.0):
        now[0] = at
        alarm.report(found, "GET /x")
    assert len(caplog.records) == 2
    assert "secret" not in caplog.text
