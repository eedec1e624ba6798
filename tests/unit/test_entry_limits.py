"""Inbound entries over the size limit: dead-lettered unread, with their size and first KiB only.

Issue 15, defect 6: a 100 MB entry was dead-lettered whole, and Redis grew by 336 MiB.
"""

from __future__ import annotations

from terminus.service.fold.decoding import KEPT_BYTES, Entry, decode_entries

EVENT = b'{"type":"text-delta","session_id":"s","turn_id":"t","seq":3,"part_id":"p","delta":"%b"}'


def test_an_entry_over_the_limit_keeps_its_first_kib_and_says_its_size() -> None:
    raw = EVENT % (b"x" * 10_000)
    [decoded] = decode_entries([Entry("1-0", {b"e": raw})], max_deliveries=5, max_bytes=4_096)
    assert decoded.event is None
    assert decoded.raw == raw[:KEPT_BYTES]
    assert decoded.problem is not None
    assert f"entry of {len(raw)} bytes exceeds the limit of 4096 bytes" in decoded.problem


def test_an_entry_at_the_limit_is_read() -> None:
    raw = EVENT % b"x"
    [decoded] = decode_entries([Entry("1-0", {b"e": raw})], max_deliveries=5, max_bytes=len(raw))
    assert decoded.problem is None
    assert decoded.event is not None
