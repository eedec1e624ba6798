"""Release entries (service/retention/records.py) as the fold decodes them: like any entry, a
release delivered too often is dead-lettered rather than retried forever."""

from __future__ import annotations

from terminus.service.fold.decoding import Entry, decode_entries
from terminus.service.fold.releases import RELEASE_FIELD, Release, encode_release

RELEASE = encode_release(Release(turns=["t-1"], forget=["t-0"], sessions=[("s-1", b"{}")]))


def test_a_release_entry_decodes_to_its_release() -> None:
    [decoded] = decode_entries([Entry("1-0", {RELEASE_FIELD: RELEASE})], max_deliveries=5)
    assert decoded.release == Release(turns=["t-1"], forget=["t-0"], sessions=[("s-1", b"{}")])
    assert (decoded.event, decoded.problem, decoded.raw) == (None, None, RELEASE)


def test_a_release_delivered_too_often_or_forced_is_a_dead_letter() -> None:
    entries = [Entry("1-0", {RELEASE_FIELD: RELEASE}, deliveries=6), Entry("2-0", {b"r": b"{}"})]
    too_often, forced = decode_entries(entries, max_deliveries=5, forced={"2-0": "delivered 9"})
    assert (too_often.release, too_often.problem) == (None, "delivered 6 times (max 5)")
    assert too_often.raw == RELEASE
    assert (forced.release, forced.problem) == (None, "delivered 9")


def test_a_malformed_release_or_one_beside_other_fields_is_a_dead_letter() -> None:
    entries = [
        Entry("1-0", {RELEASE_FIELD: b"{bad"}),
        Entry("2-0", {RELEASE_FIELD: RELEASE, b"x": b""}),
    ]
    bad, mixed = decode_entries(entries, max_deliveries=5)
    assert bad.problem is not None
    assert bad.problem.startswith("undecodable: release: ")
    assert mixed.problem == "entry has no field 'e'"


def test_a_release_archived_to_no_stream_id_is_a_dead_letter() -> None:
    """The fold reads `archived_to` as a stream id: anything else must not reach it."""
    good = encode_release(Release(archived_to="17-3"))
    entries = [Entry("1-0", {RELEASE_FIELD: good})]
    entries += [
        Entry(f"{n}-0", {RELEASE_FIELD: b'{"archived_to": "%s"}' % bad})
        for n, bad in enumerate((b"17", b"x-1", b"1-2-3", b"9" * 19 + b"-0"), start=2)
    ]
    [ok, *bad] = decode_entries(entries, max_deliveries=5)
    assert ok.release == Release(archived_to="17-3")
    assert all(d.release is None for d in bad)
    assert all((d.problem or "").startswith("undecodable: release: ") for d in bad)
    assert len(bad) == 4
