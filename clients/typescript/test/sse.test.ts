import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser, type ServerSentEvent } from "../src/sse.js";

const encoder = new TextEncoder();

function parseIn(pieces: string[], end = true): ServerSentEvent[] {
  const parser = new SseParser();
  const events = pieces.flatMap((piece) => parser.feed(encoder.encode(piece)));
  return end ? [...events, ...parser.finish()] : events;
}

const STREAM =
  "\ufeff: ping\r\nid: 1-0\r\nevent: agent_message_chunk\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
  "id: 1-1\rdata: é✓\r\r: comment\nid: 1-2\ndata:x\n\n";

const EXPECTED = [
  { id: "1-0", event: "agent_message_chunk", data: '{"a":\n1}' },
  { id: "1-1", event: "message", data: "é✓" },
  { id: "1-2", event: "message", data: "x" },
];

test("every split of the stream gives the same events", () => {
  const bytes = encoder.encode(STREAM);
  for (let at = 0; at <= bytes.length; at++) {
    const parser = new SseParser();
    const events = [
      ...parser.feed(bytes.slice(0, at)),
      ...parser.feed(bytes.slice(at)),
      ...parser.finish(),
    ];
    assert.deepEqual(events, EXPECTED, `split at byte ${at}`);
  }
});

test("an event cut before its blank line is lost, the ones before it kept", () => {
  assert.deepEqual(parseIn(["id: 1-0\ndata: a\n\nid: 1-1\ndata: b"]), [
    { id: "1-0", event: "message", data: "a" },
  ]);
});

test("a comment or a blank line alone dispatches nothing", () => {
  assert.deepEqual(parseIn([": keep-alive\n\n", "\n\n"]), []);
});

test("the id carries over to later events that do not set one", () => {
  const events = parseIn(["id: 7-0\ndata: a\n\ndata: b\n\n"]);
  assert.deepEqual(events.map((e) => e.id), ["7-0", "7-0"]);
});
