"""What the codec tests share: a usage with every counter set, in events, frames and records."""

from __future__ import annotations

from typing import Final

from terminus.events.inbound import Usage

USAGE: Final = Usage(
    input_tokens=10,
    output_tokens=20,
    reasoning_tokens=3,
    cache_read_tokens=4,
    cache_write_tokens=5,
)
