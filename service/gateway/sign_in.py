"""Signing in once, so that no token travels in a URL: the inspector's cookie, and what the
gateway does to keep tokens out of logs and Referer headers (issue 21, docs/security.md).

    POST   /v1/session-cookie   with `Authorization: Bearer <token>`: the token (checked first) is
                                set as an `HttpOnly; SameSite=Strict; Path=/` cookie (`Secure` when
                                the request came over https), expiring with the token. 204.
    GET    /v1/session-cookie   `{"signed_in": bool, "admin": bool, "expires": unix}`, 200 either
                                way: a page asks before its first call (script cannot read an
                                HttpOnly cookie).
    DELETE /v1/session-cookie   signs out: the cookie is cleared. 204.

The cookie carries the same token a Bearer header would, so it grants the same reads. It is
accepted on GET routes only, all of which only read; SameSite=Strict keeps another site's pages
from sending it, and signing in needs the Bearer header, which a cross-site form cannot set.

`NoReferrer` adds `Referrer-Policy: no-referrer` to every response: a URL that must carry a token
(a browser's EventSource cannot send headers) is never passed on to another site; the access log
masks it (`terminus.service.redaction.RedactTokens`).
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE: Final = "terminus_token"


def cookie_header(token: str, max_age: int, secure: bool) -> str:
    """The Set-Cookie value that signs the browser in for `max_age` seconds (0: signs out)."""
    flags = f"Path=/; Max-Age={max(0, max_age)}; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={token}; {flags}{'; Secure' if secure else ''}"


class NoReferrer:
    """ASGI middleware: `Referrer-Policy: no-referrer` on every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"referrer-policy"]
                message["headers"] = [*headers, (b"referrer-policy", b"no-referrer")]
            await send(message)

        await self.app(scope, receive, sending)
