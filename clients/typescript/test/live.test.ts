import assert from "node:assert/strict";
import { test } from "node:test";
import { LiveSession } from "../src/live.js";
import { decoded } from "../src/update.js";

const ids = { session_id: "s", turn_id: "t" };

function chunk(cursor: string, attempt: number, part: string, delta: string) {
  const frame = { sessionUpdate: "agent_message_chunk", ...ids, step: 1, attempt, part_id: part, delta };
  return decoded(cursor, JSON.stringify(frame));
}

test("a discarded attempt's parts vanish; a retry reusing the part id keeps its own", () => {
  const view = new LiveSession();
  view.apply(chunk("1-0", 1, "p0", "Hel"));
  view.apply(chunk("1-1", 1, "p0", "lo wor"));
  const discard = { sessionUpdate: "attempt_discarded", ...ids, step: 1, attempt: 1, part_ids: ["p0"], reason: "missing_terminal" };
  view.apply(decoded("1-2", JSON.stringify(discard)));
  assert.equal(view.text("t"), "");
  view.apply(chunk("1-3", 2, "p0", "Hello"));
  assert.equal(view.text("t"), "Hello");
});

test("an update at or before the last cursor changes nothing", () => {
  const view = new LiveSession();
  assert.equal(view.apply(chunk("5-1", 1, "p", "a")), true);
  assert.equal(view.apply(chunk("5-1", 1, "p", "a")), false);
  assert.equal(view.apply(chunk("5-0", 1, "p", "b")), false);
  assert.equal(view.apply(chunk("10-0", 1, "p", "c")), true, "10 ms after 5 ms, not before");
  assert.equal(view.text("t"), "ac");
});

test("a typed error ends the turn as failed with its payload", () => {
  const view = new LiveSession();
  const error = { type: "rate_limit", message: "slow down", retryable: true, status: 429 };
  view.apply(decoded("2-0", JSON.stringify({ sessionUpdate: "agent_error", ...ids, error })));
  const turn = view.turns.get("t");
  assert.equal(turn?.status, "failed");
  assert.equal(turn?.error?.type, "rate_limit");
});

test("an unknown frame kind or a non-frame is unreadable, naming the cursor", () => {
  assert.throws(() => decoded("3-0", JSON.stringify({ sessionUpdate: "new_kind", ...ids })), /3-0.*new_kind/);
  assert.throws(() => decoded("3-1", "{not json"), /unreadable frame at 3-1/);
});
