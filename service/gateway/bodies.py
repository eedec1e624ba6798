"""Request bodies: the gateway reads none (every route acts on its path, query and headers) but
the producer routes' (service/gateway/producing.py, which bound what they read themselves), so a
request that declares one larger than the bound is refused before any route runs and before a
byte of it is read.

    Content-Length above max_body_bytes (0)     413
    any Transfer-Encoding (chunked, ...)         413: a body of undeclared length, whose size
                                                 only reading it would tell
    a Content-Length that is not a number        400

Issue 30: the bound was checked against Content-Length alone, so a chunked body skipped it (a
50 MB chunked POST to the cookie route answered 204 while the server read and discarded the
body). Each refusal says `Connection: close`, so uvicorn closes the connection after the answer
instead of reading the body through to reach a next request.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from terminus.service.gateway.params import BadParam, non_negative


class BodyBound:
    """ASGI middleware: refuse a request whose body may exceed `max_body_bytes`, unread."""

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int = 0,
        reads_body: Callable[[Scope], bool] = lambda scope: False,
    ) -> None:
        self.app, self.max_body_bytes, self.reads_body = app, max_body_bytes, reads_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.reads_body(scope):
            refusal = _refusal(Headers(scope=scope), self.max_body_bytes)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refusal(headers: Headers, max_body_bytes: int) -> JSONResponse | None:
    if "transfer-encoding" in headers:
        return _answer(413, "request bodies of undeclared length (Transfer-Encoding) are refused")
    try:
        length = non_negative(headers.get("content-length"), "content-length", 0)
    except BadParam as exc:
        return _answer(400, str(exc))
    if length > max_body_bytes:
        return _answer(413, "request body not allowed")
    return None


def _answer(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status, headers={"Connection": "close"})
