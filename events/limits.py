"""Every bound on what a producer reads from its upstream, apart from the adapters that apply
them: the settings read them without loading a provider's adapter (a frontend that reads the
settings or the shape needs none)."""

from __future__ import annotations

from typing import Final

import msgspec

# 4x the largest single provider event we know of: a base64 image of OpenAI's image generation
# (`partial_image_b64`, 1.3-4 MB on one `data:` line).
MAX_SSE_LINE_CHARS: Final = 16 * 1024 * 1024
MAX_SSE_EVENT_CHARS: Final = 16 * 1024 * 1024
# A whole 2xx body, decoded: ten times a long answer's stream (128k output tokens, ~25 MB of SSE).
MAX_BODY_BYTES: Final = 256 * 1024 * 1024
# One deflate layer cannot pass about 1032:1 and streams we measured stay under 300:1: this stops
# stacked encodings (gzip over gzip passes 100,000:1) before they cost the decoding.
MAX_BODY_RATIO: Final = 1000
# Provider error bodies are a few hundred bytes; a proxy's HTML error page a few KiB.
MAX_ERROR_BODY_BYTES: Final = 64 * 1024


class UpstreamLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Every bound on what a producer reads from its upstream (docs/producers.md, "Bounds").

    SSE bounds are in characters of the decoded text (bytes, for the ASCII JSON providers send);
    the wires apply the event bound to a JSON array element in bytes. The body bounds are read by
    the HTTP callers (service/sdk/bodies.py), the error-body bound by the publisher too."""

    max_sse_line_chars: int = MAX_SSE_LINE_CHARS
    max_sse_event_chars: int = MAX_SSE_EVENT_CHARS
    max_body_bytes: int = MAX_BODY_BYTES
    max_body_ratio: int = MAX_BODY_RATIO
    max_error_body_bytes: int = MAX_ERROR_BODY_BYTES
