import assert from "node:assert/strict";
import { test } from "node:test";
import { LiveSession } from "../src/live.js";
import { decoded, UnknownFrames, type Update } from "../src/update.js";

const ids = { session_id: "s", turn_id: "t" };

function at(cursor: string, frame: object, unknown = new UnknownFrames()): Update {
  const update = decoded(cursor, JSON.stringify(frame), unknown);
  assert.ok(update !== null, `a frame of a known kind at ${cursor}`);
  return update;
}

function chunk(cursor: string, attempt: number, part: string, delta: string): Update {
  return at(cursor, { sessionUpdate: "agent_message_chunk", ...ids, step: 1, attempt, part_id: part, delta });
}

function ended(cursor: string, stopReason: string): Update {
  const usage = { input_tokens: 1, output_tokens: 1 };
  return at(cursor, { sessionUpdate: "turn_finished", ...ids, stopReason, usage });
}

test("a discarded attempt's parts vanish; a retry reusing the part id keeps its own", () => {
  const view = new LiveSession();
  view.apply(chunk("1-0", 1, "p0", "Hel"));
  view.apply(chunk("1-1", 1, "p0", "lo wor"));
  const discard = { sessionUpdate: "attempt_discarded", ...ids, step: 1, attempt: 1, part_ids: ["p0"], reason: "missing_terminal" };
  view.apply(at("1-2", discard));
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
  view.apply(at("2-0", { sessionUpdate: "agent_error", ...ids, error }));
  const turn = view.turns.get("t");
  assert.equal(turn?.status, "failed");
  assert.equal(turn?.error?.type, "rate_limit");
});

test("a cancelled turn is cancelled, not finished; a finished one is finished", () => {
  const view = new LiveSession();
  view.apply(chunk("4-0", 1, "p", "Half an ans"));
  view.apply(ended("4-1", "cancelled"));
  assert.equal(view.turns.get("t")?.status, "cancelled");
  assert.equal(view.turns.get("t")?.stopReason, "cancelled");
  view.apply(ended("4-2", "end_turn"));
  assert.equal(view.turns.get("t")?.status, "finished");
});

test("an update carries its frame's kind, as the Python SDK's Update.kind", () => {
  assert.equal(chunk("6-0", 1, "p", "a").kind, "agent_message_chunk");
  assert.equal(ended("6-1", "end_turn").kind, "turn_finished");
});

test("a frame of a kind from the future is passed over: counted, reported once, never thrown", () => {
  const reported: [string, string][] = [];
  const unknown = new UnknownFrames((kind, cursor) => reported.push([kind, cursor]));
  const future = { sessionUpdate: "usage_forecast", ...ids, tokens: 12 };
  assert.equal(decoded("7-0", JSON.stringify(future), unknown), null);
  assert.equal(decoded("7-1", JSON.stringify(future), unknown), null);
  assert.equal(decoded("7-0", JSON.stringify(future), unknown), null, "read again after a resume");
  assert.equal(decoded("7-2", JSON.stringify({ sessionUpdate: "plan", ...ids }), unknown), null);
  assert.deepEqual(Object.fromEntries(unknown.counts), { usage_forecast: 2, plan: 1 });
  assert.equal(unknown.total, 3);
  assert.deepEqual(reported, [["usage_forecast", "7-0"], ["plan", "7-2"]]);
});

test("a known kind with a field from the future is read; the field changes nothing", () => {
  const view = new LiveSession();
  const wider = { sessionUpdate: "agent_message_chunk", ...ids, step: 1, attempt: 1, part_id: "p", delta: "Hi", tokens: 1 };
  view.apply(at("8-0", wider));
  assert.equal(view.text("t"), "Hi");
});

test("a non-frame is unreadable, naming the cursor", () => {
  const unknown = new UnknownFrames();
  assert.throws(() => decoded("3-1", "{not json", unknown), /unreadable frame at 3-1/);
  assert.throws(() => decoded("3-2", "[1]", unknown), /3-2.*not a JSON object/);
  assert.throws(() => decoded("3-3", JSON.stringify({ ...ids }), unknown), /3-3.*no frame kind/);
  assert.throws(() => decoded("3-4", JSON.stringify({ sessionUpdate: "retrying" }), unknown), /3-4.*turn_id/);
  assert.equal(unknown.total, 0);
});
