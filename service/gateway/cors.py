"""Cross-origin access for browser pages on other origins (`TERMINUS_CORS_ORIGINS`, off by
default): the listed origins may read sessions and cancel turns with a Bearer token.

Credentials (the cookie) are not allowed across origins: a page on another origin carries its
token in `Authorization`, so a site a user merely visits cannot ride on the inspector's cookie.
Preflights are answered for the headers the TypeScript client sends (`Authorization`,
`Last-Event-ID`) and cached for ten minutes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

METHODS: Final = ("GET", "POST", "DELETE")
HEADERS: Final = ("authorization", "last-event-id", "content-type")
MAX_AGE_S: Final = 600


def cors(origins: Sequence[str]) -> Middleware:
    """The middleware that answers the listed origins (or any, for `*`)."""
    return Middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_methods=list(METHODS),
        allow_headers=list(HEADERS),
        allow_credentials=False,
        max_age=MAX_AGE_S,
    )
