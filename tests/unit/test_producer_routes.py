"""The pure parts of the producer routes: the token bucket, the attempt's form, which requests
may carry a body (service/gateway/producing.py, attempts.py)."""

from __future__ import annotations

import pytest

from terminus.service.gateway.attempts import FormError, attempt_form
from terminus.service.gateway.producing import Buckets, ProducerRate, reads_body


def test_a_bucket_allows_its_burst_then_refills_at_its_rate() -> None:
    now = [100.0]
    buckets = Buckets(ProducerRate(per_s=2.0, burst=3), lambda: now[0])
    assert [buckets.wait_s("t") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.wait_s("t") == pytest.approx(0.5)
    assert buckets.wait_s("other") == 0.0  # one bucket per token
    now[0] += 0.5
    assert buckets.wait_s("t") == 0.0
    assert buckets.wait_s("t") > 0


def test_the_form_reads_provider_attempt_and_the_upstream_error() -> None:
    form = attempt_form(
        {
            "x-terminus-provider": "openai-chat:deepseek",
            "x-terminus-attempt": "2",
            "x-terminus-upstream-status": "529",
            "x-terminus-upstream-header-retry-after": "7",
            "content-encoding": "gzip",
        }
    )
    assert (form.provider, form.step, form.attempt) == ("openai-chat:deepseek", None, 2)
    assert (form.upstream_status, form.upstream_headers) == (529, {"retry-after": "7"})
    assert form.content_encoding == "gzip"


@pytest.mark.parametrize(
    ("headers", "names"),
    [
        ({}, "x-terminus-provider"),
        ({"x-terminus-provider": "nope"}, "x-terminus-provider"),
        ({"x-terminus-provider": "anthropic", "x-terminus-step": "0"}, "x-terminus-step"),
        ({"x-terminus-provider": "anthropic", "x-terminus-attempt": "x"}, "x-terminus-attempt"),
        (
            {"x-terminus-provider": "anthropic", "x-terminus-upstream-status": "200000"},
            "x-terminus-upstream-status",
        ),
    ],
)
def test_a_bad_header_is_named(headers: dict[str, str], names: str) -> None:
    with pytest.raises(FormError, match=names):
        attempt_form(headers)


def test_only_the_producer_posts_may_carry_a_body() -> None:
    assert reads_body({"method": "POST", "path": "/v1/sessions/s/turns/t/attempts"})
    assert reads_body({"method": "POST", "path": "/v1/sessions/s/turns/t/events"})
    assert not reads_body({"method": "GET", "path": "/v1/sessions/s/turns/t/attempts"})
    assert not reads_body({"method": "POST", "path": "/v1/sessions/s/turns/t/cancel"})
    assert not reads_body({"method": "POST", "path": "/v1/sessions/s/turns/t/attempts/x"})
