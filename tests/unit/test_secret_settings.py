"""The Redis URL in the settings never shows its password, however it is printed, formatted, logged
or encoded; the clients still get it whole.

Issue 31, item 7: `Settings.redis_url` was a plain `str`, so `print(settings.redis_url)`, an
f-string or a log line's `%s` of it showed the password.
"""

from __future__ import annotations

import copy
import io
import logging
import pickle
from collections.abc import Callable
from typing import Final

import msgspec
import pytest

from terminus.service.redaction import SecretUrl
from terminus.service.redis.connect import url_of
from terminus.service.redis.embedded import LOCAL_URL
from terminus.service.settings import Settings, from_env

URL: Final = (
    "rediss://app:hunter2hunter2@cache.example:6380/0?password=s3cr3tquery&ssl_ca_certs=/ca"
)
MASKED: Final = "rediss://app:***@cache.example:6380/0?password=***&ssl_ca_certs=/ca"

SHOWN: Final[dict[str, Callable[[object], str]]] = {
    "str": str,
    "repr": repr,
    "f-string": lambda value: f"{value}",
    "f-string !r": lambda value: f"{value!r}",
    "format spec": lambda value: f"{value:>200}" if isinstance(value, SecretUrl) else str(value),
    # as a log line formats its arguments
    "%-format": lambda value: "%s %r" % (value, value),  # noqa: UP031
    "str.format": "{0} {0!r}".format,
}


@pytest.fixture
def settings() -> Settings:
    return from_env({"REDIS_URL": URL})


@pytest.mark.parametrize("how", SHOWN)
def test_the_url_and_the_settings_print_masked(settings: Settings, how: str) -> None:
    for value in (settings.redis_url, settings):
        text = SHOWN[how](value)
        assert "hunter2" not in text
        assert "s3cr3t" not in text
        assert "app:***@cache.example" in text


def test_a_log_line_of_the_url_is_masked(settings: Settings) -> None:
    stream = io.StringIO()
    logger = logging.getLogger("terminus.test-secret-settings")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        logger.warning("url %s %r; settings %s", settings.redis_url, settings.redis_url, settings)
        logger.warning(settings.redis_url)
    finally:
        logger.removeHandler(handler)
    assert "hunter2" not in stream.getvalue()
    assert "s3cr3t" not in stream.getvalue()
    assert MASKED in stream.getvalue()


def test_msgspec_refuses_to_encode_it_or_encodes_it_masked(settings: Settings) -> None:
    for encode in (msgspec.json.encode, msgspec.msgpack.encode, msgspec.to_builtins):
        with pytest.raises(TypeError, match="SecretUrl"):
            encode(settings)
    assert msgspec.to_builtins(settings, enc_hook=str)["redis_url"] == MASKED
    assert b"hunter2" not in msgspec.json.encode(settings, enc_hook=str)


def test_pickle_refuses_it_and_a_copy_is_the_same_url(settings: Settings) -> None:
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(settings)
    assert copy.deepcopy(settings) == settings
    assert copy.copy(settings.redis_url) is settings.redis_url


def test_the_real_url_is_what_a_client_is_made_with(settings: Settings) -> None:
    assert settings.redis_url is not None
    assert settings.redis_url.reveal() == URL
    assert url_of(settings) == URL
    assert url_of(Settings()) == LOCAL_URL


def test_equal_urls_are_equal_secrets() -> None:
    assert SecretUrl(URL) == SecretUrl(URL)
    assert SecretUrl(URL) != SecretUrl(MASKED)
    assert SecretUrl(URL) != URL
    assert from_env({"REDIS_URL": URL}) == Settings(redis_url=SecretUrl(URL))
