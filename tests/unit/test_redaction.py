"""A Redis URL shown to humans never carries its password (service/redaction.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from terminus.service.redaction import SecretUrl, redacted_tokens, redacted_url
from terminus.service.settings import Settings, from_env


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://user:s3cret@host:6380/2", "redis://user:***@host:6380/2"),
        ("rediss://:s3cret@host:6380", "rediss://:***@host:6380"),
        ("rediss://app@host:6380", "rediss://app@host:6380"),
        (
            "redis://u:p%40ss@host/0?ssl_ca_certs=/ca.pem",
            "redis://u:***@host/0?ssl_ca_certs=/ca.pem",
        ),
        ("redis://host/0?password=s3cret&db=1", "redis://host/0?password=***&db=1"),
        ("unix://:s3cret@/tmp/redis.sock?db=0", "unix://:***@/tmp/redis.sock?db=0"),
        ("unix:///tmp/redis.sock?password=s3cret&db=2", "unix:///tmp/redis.sock?password=***&db=2"),
        ("redis://u:s3cret@[::1", "<a Redis URL that does not parse>"),
    ],
)
def test_the_password_is_masked_wherever_it_is(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


URL_SAFE = st.characters(categories=["L", "N"], include_characters="-._~!$'()*,")


@given(
    user=st.text(URL_SAFE, max_size=12),
    password=st.text(URL_SAFE | st.just(":"), min_size=1, max_size=24),
)
def test_no_password_survives_redaction(user: str, password: str) -> None:
    shown = redacted_url(f"rediss://{user}:{password}@cache.example:6380/0?password={password}")
    assert shown == f"rediss://{user}:***@cache.example:6380/0?password=***"


def test_settings_never_print_the_url_s_password() -> None:
    settings = from_env({"REDIS_URL": "rediss://app:hunter2hunter2@cache.example:6380/0"})
    assert settings.redis_url is not None
    assert settings.redis_url.reveal() == "rediss://app:hunter2hunter2@cache.example:6380/0"
    for text in (repr(settings), str(settings), f"{settings}", f"{settings!r}"):
        assert "hunter2" not in text
        assert "rediss://app:***@cache.example:6380/0" in text
    assert "hunter2" not in repr(Settings(redis_url=SecretUrl("redis://:hunter2@h")))


def spelled(name: str) -> st.SearchStrategy[str]:
    """`name` with each letter as it is, in upper case, or percent-encoded (either hex case)."""
    forms = [st.sampled_from([c, c.upper(), f"%{ord(c):02x}", f"%{ord(c):02X}"]) for c in name]
    return st.tuples(*forms).map("".join)


@given(name=spelled("token"), value=st.text(URL_SAFE, min_size=8, max_size=40))
def test_a_token_is_masked_however_its_name_is_spelled(name: str, value: str) -> None:
    """Issue 30: `?%74oken=` and `?tok%65n=` were written to the access log in full."""
    line = "GET /v1/sessions/s/updates?from=1-0&{}&x=1 HTTP/1.1"
    assert redacted_tokens(line.format(f"{name}={value}")) == line.format(f"{name}=***")
