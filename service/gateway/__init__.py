"""The HTTP gateway for frontends and operators: routes, SSE hub, tokens and sign-in, the
inspector page, and serving it with uvicorn."""
