"""The official SDKs as an app uses them, async and sync: each made on a given httpx2 client and
base URL, and one streamed request that collects the text the app reads. The tee's tests and its
benchmark (bench/tee) run the same code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import anthropic
import httpx2
import openai
from google import genai
from google.genai import types as genai_types

Seen = list[str]  # what the app read of its SDK's stream


class SdkClient(NamedTuple):
    """One official client: its provider adapter, and its async and sync forms."""

    provider: str
    make: Callable[[str, Any], Any]  # base URL, httpx2.AsyncClient -> the SDK's async client
    ask: Callable[[Any, Seen], Awaitable[None]]  # the async client, what the app saw -> a request
    make_sync: Callable[[str, Any], Any]  # base URL, httpx2.Client -> the SDK's sync client
    ask_sync: Callable[[Any, Seen], None]


async def ask_anthropic(client: anthropic.AsyncAnthropic, seen: Seen) -> None:
    async with client.messages.stream(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        async for text in stream.text_stream:
            seen.append(text)


def ask_anthropic_sync(client: anthropic.Anthropic, seen: Seen) -> None:
    with client.messages.stream(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        for text in stream.text_stream:
            seen.append(text)


async def ask_openai(client: openai.AsyncOpenAI, seen: Seen) -> None:
    stream = await client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for chunk in stream:
        for choice in chunk.choices:
            seen.append(choice.delta.content or "")


def ask_openai_sync(client: openai.OpenAI, seen: Seen) -> None:
    stream = client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    for chunk in stream:
        for choice in chunk.choices:
            seen.append(choice.delta.content or "")


def make_genai(url: str, http: httpx2.AsyncClient | httpx2.Client) -> genai.Client:
    """A google-genai client on `http`; it retries only when given `retry_options`."""
    if isinstance(http, httpx2.AsyncClient):
        options = genai_types.HttpOptions(base_url=url, httpx_async_client=http)
    else:
        options = genai_types.HttpOptions(base_url=url, httpx_client=http)
    return genai.Client(api_key="k", http_options=options)


async def ask_genai(client: genai.Client, seen: Seen) -> None:
    async for chunk in await client.aio.models.generate_content_stream(
        model="gemini-x", contents="hi"
    ):
        seen.append(chunk.text or "")


def ask_genai_sync(client: genai.Client, seen: Seen) -> None:
    for chunk in client.models.generate_content_stream(model="gemini-x", contents="hi"):
        seen.append(chunk.text or "")


SDK_CLIENTS = {
    "anthropic": SdkClient(
        "anthropic",
        lambda url, http: anthropic.AsyncAnthropic(
            api_key="k", base_url=url, http_client=http, max_retries=0
        ),
        ask_anthropic,
        lambda url, http: anthropic.Anthropic(
            api_key="k", base_url=url, http_client=http, max_retries=0
        ),
        ask_anthropic_sync,
    ),
    "openai": SdkClient(
        "openai-chat",
        lambda url, http: openai.AsyncOpenAI(
            api_key="k", base_url=url + "/v1", http_client=http, max_retries=0
        ),
        ask_openai,
        lambda url, http: openai.OpenAI(
            api_key="k", base_url=url + "/v1", http_client=http, max_retries=0
        ),
        ask_openai_sync,
    ),
    "google-genai": SdkClient("gemini", make_genai, ask_genai, make_genai, ask_genai_sync),
}
