"""Settings of the pure core; the shell builds one from its environment."""

from __future__ import annotations

import msgspec

from terminus.statemachines.retry_policy import RetryPolicy


class CoreConfig(msgspec.Struct, frozen=True, kw_only=True):
    """`keep_partial`: on exhaustion keep the failed attempt as a partial record, else drop it."""

    retry: RetryPolicy = RetryPolicy()
    keep_partial: bool = True


DEFAULT_CONFIG = CoreConfig()
