// runTurn and terminusFetch against a gateway stand-in on a loopback port (the producer routes:
// attempts, commands as SSE, messages) and a provider stand-in (a fetch): what reaches the
// gateway, how decisions are followed, and the gateway's failures waited out.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import type { PersistedMessage, ProducerCommand } from "../src/contract.js";
import { TurnCancelled, TurnRefused } from "../src/errors.js";
import { runTurn, type RunTurnOptions } from "../src/producer/run.js";
import { split, terminusFetch } from "../src/producer/tee.js";

const FAST = { initialS: 0.001, maxS: 0.01, giveUpAfterS: 5 };
const IDS = { session_id: "s", turn_id: "t" };
const MESSAGE: PersistedMessage = {
  ...IDS,
  message_id: "msg-t",
  parts: [{ type: "text", part_id: "p", text: "Hello" }],
  finish_reason: "stop",
  usage: {},
  provider: "anthropic",
  model: "m",
};

interface Posted {
  headers: IncomingMessage["headers"];
  body: string;
}

/** The gateway stand-in: each attempt POST is answered by `answer` (status, or the decision the
 * workers then write), commands are served from the entries written so far. */
class Gateway {
  posts: Posted[] = [];
  reads: (string | null)[] = [];
  entries: { id: string; command: ProducerCommand }[] = [];
  commandFailures: ("503" | "cut")[] = [];
  /** A decision the workers make while the attempt still streams in: written once `body` holds
   * what it waits for (the provider's last event), before the POST ends. */
  streaming: { until: string; command: ProducerCommand } | null = null;

  constructor(readonly answer: (post: Posted, n: number) => number | ProducerCommand | null) {}

  write(command: ProducerCommand): void {
    this.entries.push({ id: `5-${this.entries.length + 1}`, command });
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://x");
    if (url.pathname.endsWith("/attempts")) return this.attempt(request, response);
    if (url.pathname.endsWith("/commands")) return this.commands(url, response);
    if (url.pathname.endsWith("/messages")) {
      assert.equal(request.headers.authorization, "Bearer reader");
      response.end(JSON.stringify({ messages: [MESSAGE], total: 1, next_offset: null }));
      return;
    }
    response.writeHead(404).end();
  }

  private async attempt(request: IncomingMessage, response: ServerResponse): Promise<void> {
    assert.equal(request.headers.authorization, "Bearer producer");
    let body = "";
    for await (const chunk of request) {
      body += String(chunk);
      if (this.streaming !== null && body.includes(this.streaming.until)) {
        this.write(this.streaming.command);
        this.streaming = null;
      }
    }
    const post = { headers: request.headers, body };
    this.posts.push(post);
    const from = `5-${this.entries.length}`;
    const answer = this.answer(post, this.posts.length);
    if (typeof answer === "number") {
      response.writeHead(answer, { "content-type": "application/json" }).end('{"error":"no"}');
      return;
    }
    if (answer !== null) this.write(answer);
    response.end(JSON.stringify({ ...IDS, step: 1, attempt: 1, next_seq: 9, commands_from: from }));
  }

  private async commands(url: URL, response: ServerResponse): Promise<void> {
    const from = url.searchParams.get("from");
    this.reads.push(from);
    const failure = from === null ? undefined : this.commandFailures.shift();
    if (failure === "503") return void response.writeHead(503).end();
    response.writeHead(200, { "content-type": "text/event-stream" });
    if (failure === "cut") return void setTimeout(() => response.destroy(), 10);
    const after = from === null ? this.entries.length : this.entries.findIndex((e) => e.id === from) + 1;
    while (!response.destroyed) {
      const entry = this.entries[after];
      if (entry !== undefined) {
        const { id, command } = entry;
        return void response.end(`id: ${id}\nevent: ${command.type}\ndata: ${JSON.stringify(command)}\n\n`);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

async function serving(gateway: Gateway, body: (options: RunTurnOptions) => Promise<void>): Promise<void> {
  const server = createServer((request, response) => void gateway.handle(request, response));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const options = {
    gateway: `http://127.0.0.1:${port}`,
    token: "producer",
    readToken: "reader",
    session: "s",
    turn: "t",
    backoff: FAST,
  };
  try {
    await body(options);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

function retry(attempt: number, delay_ms = 5): ProducerCommand {
  return { type: "retry_scheduled", ...IDS, step: 1, attempt, delay_ms, not_before_ms: 0, reason: "rate_limit" };
}

function concluded(state: "finished" | "cancelled"): ProducerCommand {
  const end =
    state === "finished"
      ? { message_id: "msg-t", stop_reason: "end_turn" as const }
      : { stop_reason: "cancelled" as const };
  return { type: "turn_concluded", ...IDS, step: 1, attempt: 1, state, ...end };
}

/** A provider stand-in: each call answers with the next of `answers` (status, body pieces). */
function provider(answers: [number, string[]][]): typeof fetch {
  return async () => {
    const [status, pieces] = answers.shift() ?? [500, []];
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const piece of pieces) controller.enqueue(new TextEncoder().encode(piece));
        controller.close();
      },
    });
    return new Response(body, { status, headers: { "retry-after": "0", "content-encoding": "gzip" } });
  };
}

async function ask(fetcher: typeof fetch, seen: string[]): Promise<void> {
  const response = await fetcher("https://api.example/v1/messages", { method: "POST", body: '{"model":"m"}' });
  seen.push(await response.text());
}

test(
  "a retry calls the attempt function again; each answer reaches the gateway as the app read it",
  { timeout: 10_000 },
  async () => {
    const gateway = new Gateway((_, n) => (n === 1 ? retry(2) : concluded("finished")));
    const fetcher = terminusFetch({
      fetch: provider([
        [429, ['{"error":', '"slow"}']],
        [200, ["data: a\n", "\ndata: b\n\n"]],
      ]),
    });
    const seen: string[] = [];
    const numbers: number[] = [];
    await serving(gateway, async (options) => {
      const message = await runTurn(options, async (attempt) => {
        numbers.push(attempt.number);
        await ask(fetcher, seen);
      });
      assert.deepEqual(message, MESSAGE);
    });
    assert.deepEqual(numbers, [1, 2]);
    assert.deepEqual(seen, ['{"error":"slow"}', "data: a\n\ndata: b\n\n"]);
    assert.deepEqual(
      gateway.posts.map((p) => p.body),
      seen,
    );
    const [first, second] = gateway.posts.map((p) => p.headers);
    assert.equal(first?.["x-terminus-provider"], "anthropic");
    assert.equal(first?.["x-terminus-model"], "m");
    assert.equal(first?.["x-terminus-upstream-status"], "429");
    assert.equal(first?.["x-terminus-upstream-header-retry-after"], "0");
    assert.equal(first?.["x-terminus-upstream-header-content-encoding"], undefined); // decoded by fetch
    assert.equal(first?.["content-encoding"], undefined);
    assert.deepEqual([second?.["x-terminus-attempt"], second?.["x-terminus-upstream-status"]], ["2", undefined]);
    // Attempt 1's decision is read from its commands_from; the retry's wait, and attempt 2, watch
    // from attempt 1's decision.
    assert.deepEqual(
      gateway.reads.filter((r) => r !== null),
      ["5-0", "5-1", "5-1"],
    );
  },
);

test("a cancel while the request streams aborts it and rejects with TurnCancelled", { timeout: 10_000 }, async () => {
  const gateway = new Gateway(() => null);
  let aborted = false;
  const hanging: typeof fetch = async (_, init) => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("data: a\n\n"));
        init?.signal?.addEventListener("abort", () => {
          aborted = true;
          controller.error(new DOMException("aborted", "AbortError"));
        });
      },
    });
    setTimeout(() => gateway.write(concluded("cancelled")), 50); // the user's Stop, mid-stream
    return new Response(body);
  };
  const fetcher = terminusFetch({ fetch: hanging });
  await serving(gateway, async (options) => {
    await assert.rejects(
      runTurn(options, (attempt) => ask(fetcher, [])),
      TurnCancelled,
    );
  });
  assert.ok(aborted, "the provider request was aborted");
  assert.equal(gateway.posts[0]?.body, "data: a\n\n"); // what was read, the POST ended cleanly
});

test(
  "the gateway's failures are waited out: a lost POST becomes a transport error, cuts resume",
  { timeout: 10_000 },
  async () => {
    const gateway = new Gateway((post, n) => (n === 1 ? 503 : post.body === "" ? concluded("finished") : 500));
    gateway.commandFailures = ["503", "cut"];
    const fetcher = terminusFetch({ fetch: provider([[200, ["data: a\n\n"]]]) });
    await serving(gateway, async (options) => {
      assert.deepEqual(await runTurn(options, () => ask(fetcher, [])), MESSAGE);
    });
    const retried = gateway.posts[1]?.headers ?? {};
    assert.match(String(retried["x-terminus-transport-error"]), /^the gateway did not take the attempt: /);
    assert.deepEqual([retried["x-terminus-attempt"], retried["x-terminus-provider"]], ["1", "anthropic"]);
    assert.deepEqual(
      gateway.reads.filter((r) => r !== null),
      ["5-0", "5-0", "5-0"],
    );
  },
);

test(
  "an attempt that got through before its answer was lost is decided from the last position",
  { timeout: 10_000 },
  async () => {
    const gateway = new Gateway((_, n) => (n === 1 ? 502 : 409));
    gateway.write(retry(2)); // what the workers decided about the attempt that got through
    gateway.entries.push({
      id: "5-2",
      command: { type: "turn_refused", ...IDS, step: 1, attempt: 2, entry_id: "1-1", reason: "foreign" },
    });
    const fetcher = terminusFetch({
      fetch: provider([
        [200, ["x"]],
        [200, ["y"]],
      ]),
    });
    await serving(gateway, async (options) => {
      await assert.rejects(
        runTurn(options, () => ask(fetcher, [])),
        TurnRefused,
      );
    });
    assert.equal(gateway.reads.filter((r) => r !== null)[0], "0-0");
  },
);

test("an attempt that makes no request is published as a transport error", { timeout: 10_000 }, async () => {
  const gateway = new Gateway(() => concluded("finished"));
  await serving(gateway, async (options) => {
    await runTurn(options, async () => {
      throw new Error("the app's own bug");
    });
  });
  assert.equal(gateway.posts[0]?.headers["x-terminus-transport-error"], "Error: the app's own bug");
});

test("outside a turn terminusFetch is the fetch it wraps", { timeout: 10_000 }, async () => {
  const calls: unknown[] = [];
  const fetcher = terminusFetch({ fetch: async (input) => (calls.push(input), new Response("plain")) });
  assert.equal(await (await fetcher("https://api.example/v1/messages")).text(), "plain");
  assert.deepEqual(calls, ["https://api.example/v1/messages"]);
});

test(
  "split: a cut errors the app's copy and ends the gateway's cleanly, with what was read",
  { timeout: 10_000 },
  async () => {
    let pulls = 0;
    const source = new ReadableStream<Uint8Array>({
      pull: (c) => (pulls++ === 0 ? c.enqueue(new Uint8Array([1, 2])) : c.error(new Error("reset"))),
    });
    const { app, gateway } = split(source);
    await assert.rejects(new Response(app).arrayBuffer(), /reset/);
    assert.deepEqual([...new Uint8Array(await new Response(gateway).arrayBuffer())], [1, 2]);
  },
);

test("split: the app leaving ends the gateway's copy where it stopped reading", { timeout: 10_000 }, async () => {
  const { app, gateway } = split(new Response("abc").body);
  await app.cancel();
  assert.equal(await new Response(gateway).text(), "");
});

test("a decision on the attempt's proof lets a slow app read its stream to its end", { timeout: 10_000 }, async () => {
  // The provider sends its last event and closes a little later; the workers conclude the turn
  // as soon as the gateway has that event, while the app, slower than both, still reads. Aborting
  // the request then errors the body under it (the abort of a fetch errors a body not yet at its
  // end): an SDK reading it fails after the answer's last event, as the AI SDK's streamText does
  // (no finish). The app must see its stream end as the provider ended it.
  const gateway = new Gateway(() => null);
  gateway.streaming = { until: "data: stop", command: concluded("finished") };
  const pieces = ["data: a\n\n", "data: b\n\n", "data: stop\n\n"];
  const slowToClose: typeof fetch = async (_, init) => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const piece of pieces) controller.enqueue(new TextEncoder().encode(piece));
        const closing = setTimeout(() => controller.close(), 200);
        init?.signal?.addEventListener("abort", () => {
          clearTimeout(closing);
          controller.error(new DOMException("aborted", "AbortError"));
        });
      },
    });
    return new Response(body);
  };
  const fetcher = terminusFetch({ fetch: slowToClose });
  const seen: string[] = [];
  let ended = "";
  await serving(gateway, async (options) => {
    const message = await runTurn(options, async () => {
      const response = await fetcher("https://api.example/v1/messages", { method: "POST", body: "{}" });
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      try {
        for (let read = await reader.read(); !read.done; read = await reader.read()) {
          seen.push(new TextDecoder().decode(read.value));
          await new Promise((resolve) => setTimeout(resolve, 50)); // the app's work on each piece
        }
        ended = "at the provider's end";
      } catch (error) {
        ended = `failed: ${String(error)}`;
      }
    });
    assert.deepEqual(message, MESSAGE);
  });
  assert.equal(seen.join(""), pieces.join(""));
  assert.equal(ended, "at the provider's end");
});
