"""Settings given as text: the log level and the CORS origins are read strictly, and a bad
value names its variable (service/settings.py)."""

from __future__ import annotations

import pytest

from terminus.service.settings import SettingsError, from_env


@pytest.mark.parametrize(
    ("text", "origins"),
    [
        ("", []),
        ("https://app.example", ["https://app.example"]),
        (
            " http://localhost:5173/ , https://a.example:8443",
            ["http://localhost:5173", "https://a.example:8443"],
        ),
        ("*", ["*"]),
    ],
)
def test_cors_origins_are_a_comma_separated_list(text: str, origins: list[str]) -> None:
    assert from_env({"TERMINUS_CORS_ORIGINS": text}).cors_origins == origins


@pytest.mark.parametrize(
    "text", ["app.example", "https://app.example/path", "ftp://x.example", "https://a b"]
)
def test_a_value_that_is_not_an_origin_is_refused(text: str) -> None:
    with pytest.raises(SettingsError, match=r"TERMINUS_CORS_ORIGINS: .* is not an origin"):
        from_env({"TERMINUS_CORS_ORIGINS": text})
