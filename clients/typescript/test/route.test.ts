// The route helper against a gateway stand-in on a loopback port: the app's answer is the
// gateway's (status, headers, body streamed as it comes), the token only goes upstream, a 204
// passes through, and the two useChat routes are one call each.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { chatRoutes, uiMessageStreamResponse, uiMessageStreamUrl } from "../src/route.js";

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

async function gateway(handler: Handler, body: (base: string, asked: IncomingMessage[]) => Promise<void>): Promise<void> {
  const asked: IncomingMessage[] = [];
  const server = createServer((request, response) => {
    asked.push(request);
    handler(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await body(`http://127.0.0.1:${port}`, asked);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const START = `data: {"type":"start","messageId":"msg-t"}\n\n`;
const REST = `data: {"type":"finish"}\n\ndata: [DONE]\n\n`;

function sse(response: ServerResponse): void {
  response.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
    "access-control-allow-origin": "https://elsewhere.example",
  });
}

test("the URL names the turn, or the session's open turn, and the mode", () => {
  const one = uiMessageStreamUrl({ gateway: "http://g:8000", sessionId: "s 1", turnId: "t/1" });
  assert.equal(one, "http://g:8000/v1/sessions/s%201/turns/t%2F1/ui-message-stream?mode=hold");
  const open = uiMessageStreamUrl({ gateway: "http://g/terminus/", sessionId: "s", mode: "reset" });
  assert.equal(open, "http://g/terminus/v1/sessions/s/ui-message-stream?mode=reset");
});

test("the stream is the gateway's: headers kept, the token sent upstream, the body streamed", async () => {
  let finish = (): void => undefined;
  await gateway((_request, response) => {
    sse(response);
    response.write(START);
    finish = () => response.end(REST); // the rest only once the first chunk was read
  }, async (base, asked) => {
    const answer = await uiMessageStreamResponse({ gateway: base, token: "tok", sessionId: "s", turnId: "t" });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get("x-vercel-ai-ui-message-stream"), "v1");
    assert.equal(answer.headers.get("content-type"), "text/event-stream");
    assert.equal(answer.headers.get("cache-control"), "no-cache");
    assert.equal(answer.headers.get("x-accel-buffering"), "no");
    assert.equal(answer.headers.get("access-control-allow-origin"), null);
    assert.equal(answer.headers.get("authorization"), null);
    const reader = answer.body!.pipeThrough(new TextDecoderStream()).getReader();
    const first = await reader.read();
    assert.equal(first.value, START, "the first chunk arrives before the stream ends");
    finish();
    let rest = "";
    for (let part = await reader.read(); !part.done; part = await reader.read()) rest += part.value;
    assert.equal(rest, REST);
    assert.equal(asked[0]?.headers.authorization, "Bearer tok");
    assert.equal(asked[0]?.url, "/v1/sessions/s/turns/t/ui-message-stream?mode=hold");
  });
});

test("a 200 without the header gets it: the chat transport requires it", async () => {
  await gateway((_request, response) => {
    response.writeHead(200, { "content-type": "text/event-stream" });
    response.end(START + REST);
  }, async (base) => {
    const answer = await uiMessageStreamResponse({ gateway: base, token: "tok", sessionId: "s" });
    assert.equal(answer.headers.get("x-vercel-ai-ui-message-stream"), "v1");
    assert.equal(await answer.text(), START + REST);
  });
});

test("a 204 (no open turn) passes through, bodiless and without the stream header", async () => {
  await gateway((_request, response) => {
    response.writeHead(204);
    response.end();
  }, async (base) => {
    const answer = await uiMessageStreamResponse({ gateway: base, token: "tok", sessionId: "s" });
    assert.equal(answer.status, 204);
    assert.equal(answer.body, null);
    assert.equal(answer.headers.get("x-vercel-ai-ui-message-stream"), null);
  });
});

test("a refusal passes through with its status and body, not as a stream", async () => {
  await gateway((_request, response) => {
    response.writeHead(429, { "content-type": "application/json", "retry-after": "2" });
    response.end(`{"error":"too many streams"}`);
  }, async (base) => {
    const answer = await uiMessageStreamResponse({ gateway: base, token: "tok", sessionId: "s" });
    assert.equal(answer.status, 429);
    assert.equal(answer.headers.get("retry-after"), "2");
    assert.equal(answer.headers.get("x-vercel-ai-ui-message-stream"), null);
    assert.deepEqual(await answer.json(), { error: "too many streams" });
  });
});

test("chatRoutes: POST starts the turn and streams it; GET resumes the session's open turn", async () => {
  const started: unknown[] = [];
  await gateway((request, response) => {
    if (request.url?.startsWith("/v1/sessions/chat-1/ui-message-stream")) {
      response.writeHead(204);
      response.end();
      return;
    }
    sse(response);
    response.end(START + REST);
  }, async (base, asked) => {
    const { POST, GET } = chatRoutes({
      gateway: base,
      token: async (session) => `token-of-${session}`,
      startTurn: (chat) => {
        started.push(chat);
        return "turn-7";
      },
      mode: "reset",
    });
    const body = { id: "chat-1", messages: [{ id: "q", role: "user", parts: [] }], trigger: "submit-message" };
    const posted = await POST(new Request("http://app/api/chat", { method: "POST", body: JSON.stringify(body) }));
    assert.equal(posted.status, 200);
    assert.equal(await posted.text(), START + REST);
    assert.deepEqual(started, [body]);
    const resumed = await GET(new Request("http://app/api/chat/chat-1/stream"), { params: Promise.resolve({ id: "chat-1" }) });
    assert.equal(resumed.status, 204);
    assert.deepEqual(
      asked.map((request) => [request.url, request.headers.authorization]),
      [
        ["/v1/sessions/chat-1/turns/turn-7/ui-message-stream?mode=reset", "Bearer token-of-chat-1"],
        ["/v1/sessions/chat-1/ui-message-stream?mode=reset", "Bearer token-of-chat-1"],
      ],
    );
  });
});

test("chatRoutes: a POST without the chat's id is a 400, and starts nothing", async () => {
  const { POST } = chatRoutes({
    gateway: "http://127.0.0.1:1",
    token: () => "tok",
    startTurn: () => assert.fail("no turn for a request without an id"),
  });
  const answer = await POST(new Request("http://app/api/chat", { method: "POST", body: "{}" }));
  assert.equal(answer.status, 400);
});

test("aborting the app's request closes the upstream stream", async () => {
  let closed: Promise<void> = Promise.resolve();
  await gateway((request, response) => {
    closed = new Promise((resolve) => request.socket.on("close", () => resolve()));
    sse(response);
    response.write(START);
  }, async (base) => {
    const abort = new AbortController();
    const answer = await uiMessageStreamResponse({ gateway: base, token: "t", sessionId: "s", signal: abort.signal });
    const reader = answer.body!.getReader();
    await reader.read();
    abort.abort();
    await closed;
  });
});
