// subscribe() against a gateway stand-in on a loopback port: a stream cut mid-event is resumed
// with Last-Event-ID, so each frame arrives once; 401 is final; 429 is waited out.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { SubscriptionDenied } from "../src/errors.js";
import { subscribe } from "../src/subscribe.js";
import { UnknownFrames } from "../src/update.js";

type Handler = (request: IncomingMessage, response: ServerResponse, call: number) => void;

async function serving(handler: Handler, body: (base: string) => Promise<void>): Promise<void> {
  let calls = 0;
  const server = createServer((request, response) => handler(request, response, calls++));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await body(`http://127.0.0.1:${port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

function event(n: number, kind = "agent_message_chunk"): string {
  const frame =
    kind === "turn_finished"
      ? { sessionUpdate: kind, session_id: "s", turn_id: "t", stopReason: "end_turn", usage: {} }
      : { sessionUpdate: kind, session_id: "s", turn_id: "t", step: 1, attempt: 1, part_id: "p", delta: `${n} ` };
  return `id: 9-${n}\nevent: ${kind}\ndata: ${JSON.stringify(frame)}\n\n`;
}

function raw(n: number, frame: object): string {
  return `id: 9-${n}\ndata: ${JSON.stringify(frame)}\n\n`;
}

const FAST = { initialS: 0.001, maxS: 0.01, giveUpAfterS: 5 };

test("a stream cut mid-event resumes after the last frame received, none twice", async () => {
  const asked: (string | undefined)[] = [];
  await serving((request, response, call) => {
    asked.push(request.headers["last-event-id"] as string | undefined);
    assert.equal(request.headers.authorization, "Bearer tok");
    response.writeHead(200, { "content-type": "text/event-stream" });
    if (call === 0) {
      response.write(event(0) + event(1) + event(2).slice(0, 20));
      setTimeout(() => response.destroy(), 50); // cut mid-event, as a proxy does, once sent
    } else {
      response.end(event(2) + event(3) + event(4, "turn_finished"));
    }
  }, async (base) => {
    const cursors: string[] = [];
    for await (const update of subscribe(base, "tok", { session: "s", untilTurn: "t", backoff: FAST })) {
      cursors.push(update.cursor);
    }
    assert.deepEqual(cursors, ["9-0", "9-1", "9-2", "9-3", "9-4"]);
  });
  assert.deepEqual(asked, [undefined, "9-1"]);
});

test("a 401 is final: SubscriptionDenied", async () => {
  await serving((_request, response) => {
    response.writeHead(401, { "content-type": "application/json" });
    response.end(JSON.stringify({ error: "token required" }));
  }, async (base) => {
    const updates = subscribe(base, "", { session: "s", backoff: FAST });
    await assert.rejects(updates.next(), (error: unknown) => {
      assert.ok(error instanceof SubscriptionDenied);
      assert.equal(error.status, 401);
      assert.equal(error.reason, "token required");
      return true;
    });
  });
});

test("a 429 is waited out, then the stream is read", async () => {
  await serving((_request, response, call) => {
    if (call === 0) {
      response.writeHead(429, { "retry-after": "0" });
      response.end(JSON.stringify({ error: "too many streams" }));
      return;
    }
    response.writeHead(200, { "content-type": "text/event-stream" });
    response.end(event(0) + event(1, "turn_finished"));
  }, async (base) => {
    const kinds: string[] = [];
    for await (const update of subscribe(base, "tok", { session: "s", untilEnd: true, backoff: FAST })) {
      kinds.push(update.frame.sessionUpdate);
    }
    assert.deepEqual(kinds, ["agent_message_chunk", "turn_finished"]);
  });
});

test("a stream from a newer server: its new kind is passed over and counted once, its new field ignored", async () => {
  const future = (n: number) => raw(n, { sessionUpdate: "usage_forecast", session_id: "s", turn_id: "t", tokens: n });
  const wider = raw(2, { sessionUpdate: "agent_message_chunk", session_id: "s", turn_id: "t", step: 1, attempt: 1, part_id: "p", delta: "2 ", lang: "en" });
  const asked: (string | undefined)[] = [];
  await serving((request, response, call) => {
    asked.push(request.headers["last-event-id"] as string | undefined);
    response.writeHead(200, { "content-type": "text/event-stream" });
    if (call === 0) {
      response.end(event(0) + future(1) + wider + future(3)); // the gateway ends the stream
    } else {
      response.end(future(3) + event(4, "turn_finished"));
    }
  }, async (base) => {
    const reported: string[] = [];
    const unknownFrames = new UnknownFrames((kind, cursor) => reported.push(`${kind}@${cursor}`));
    const cursors: string[] = [];
    for await (const update of subscribe(base, "tok", { session: "s", untilTurn: "t", backoff: FAST, unknownFrames })) {
      cursors.push(`${update.cursor} ${update.kind}`);
    }
    assert.deepEqual(cursors, ["9-0 agent_message_chunk", "9-2 agent_message_chunk", "9-4 turn_finished"]);
    assert.deepEqual(Object.fromEntries(unknownFrames.counts), { usage_forecast: 2 });
    assert.deepEqual(reported, ["usage_forecast@9-1"]);
  });
  assert.deepEqual(asked, [undefined, "9-2"]);
});
