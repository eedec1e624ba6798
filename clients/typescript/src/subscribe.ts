// A session's updates from a terminus gateway, in order, each exactly once, across cuts: the
// Python SDK's `subscribe` with a `GatewaySource` (service/sdk/subscriber.py), on fetch, so it
// runs in browsers and in Node 20.
import { SourceUnavailable, SubscriptionDenied, SubscriptionRefused } from "./errors.js";
import { SseParser } from "./sse.js";
import { decoded, UnknownFrames, type Update } from "./update.js";

/** Delays between reconnects: doubling from `initialS` up to `maxS`, with jitter; after
 * `giveUpAfterS` of failures in a row (null: never) `SourceUnavailable` is thrown. */
export interface Backoff {
  initialS: number;
  maxS: number;
  giveUpAfterS: number | null;
}

export const DEFAULT_BACKOFF: Backoff = { initialS: 0.05, maxS: 5, giveUpAfterS: null };

export interface SubscribeOptions {
  /** The session to follow; the token must grant it. */
  session: string;
  /** Resume after this cursor (exclusive); null: from the first kept frame. */
  cursor?: string | null;
  /** Stop after this turn's end (its turn_finished or agent_error). */
  untilTurn?: string;
  /** Stop after the first turn end of any turn. */
  untilEnd?: boolean;
  /** Abort to stop following (the generator then returns). */
  signal?: AbortSignal;
  backoff?: Partial<Backoff>;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** Where frames of a kind this client does not know (a newer server's) are counted and
   * reported; by default one per subscription, warning once per kind on the console. */
  unknownFrames?: UnknownFrames;
}

class Interrupted extends Error {
  constructor(
    reason: string,
    readonly retryAfterS: number | null = null,
  ) {
    super(reason);
  }
}

/** The session's updates after `cursor`, then live ones, resuming by itself (with the
 * `Last-Event-ID` of the last update it yielded) after a cut, a gateway restart or a 5xx. */
export async function* subscribe(
  baseUrl: string,
  token: string,
  options: SubscribeOptions,
): AsyncGenerator<Update, void, undefined> {
  const retry = new Retry({ ...DEFAULT_BACKOFF, ...options.backoff }, options.signal);
  const unknown = options.unknownFrames ?? new UnknownFrames();
  let last = options.cursor ?? null;
  while (!options.signal?.aborted) {
    try {
      for await (const update of read(baseUrl, token, options, last, unknown)) {
        retry.reset();
        last = update.cursor;
        yield update;
        if (ends(update, options)) return;
      }
      await retry.wait(last, null); // the gateway ended the stream: resume
    } catch (error) {
      if (options.signal?.aborted) return;
      if (!(error instanceof Interrupted)) throw error;
      await retry.wait(last, error);
    }
  }
}

function ends(update: Update, options: SubscribeOptions): boolean {
  const kind = update.frame.sessionUpdate;
  if (kind !== "turn_finished" && kind !== "agent_error") return false;
  return options.untilEnd === true || update.frame.turn_id === options.untilTurn;
}

async function* read(
  baseUrl: string,
  token: string,
  options: SubscribeOptions,
  after: string | null,
  unknown: UnknownFrames,
): AsyncGenerator<Update, void, undefined> {
  const url = new URL(`v1/sessions/${encodeURIComponent(options.session)}/updates`, withSlash(baseUrl));
  if (options.untilTurn !== undefined) url.searchParams.set("until_turn", options.untilTurn);
  const headers: Record<string, string> = {
    Authorization: `Bearer ${token}`,
    Accept: "text/event-stream",
  };
  if (after !== null) headers["Last-Event-ID"] = after;
  const fetcher = options.fetch ?? fetch;
  let response: Response;
  try {
    response = await fetcher(url, { headers, signal: options.signal, cache: "no-store" });
  } catch (error) {
    throw new Interrupted(String(error));
  }
  await check(response);
  if (response.body === null) throw new Interrupted("no body");
  const parser = new SseParser();
  const reader = response.body.getReader();
  try {
    while (true) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        throw new Interrupted(String(error));
      }
      const events = chunk.done ? parser.finish() : parser.feed(chunk.value);
      for (const event of events) {
        const update = event.data ? decoded(event.id, event.data, unknown) : null;
        if (update !== null) yield update;
      }
      if (chunk.done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

async function check(response: Response): Promise<void> {
  const status = response.status;
  if (status === 200) return;
  const reason = await reasonOf(response);
  if (status === 401 || status === 403) throw new SubscriptionDenied(status, reason);
  if (status === 429) throw new Interrupted(`429: ${reason}`, retryAfter(response.headers.get("retry-after")));
  if (status >= 300 && status < 500) throw new SubscriptionRefused(status, reason);
  throw new Interrupted(`${status}: ${reason}`);
}

async function reasonOf(response: Response): Promise<string> {
  const body = (await response.text().catch(() => "")).slice(0, 500);
  try {
    const error = (JSON.parse(body) as { error?: unknown }).error;
    if (error !== undefined) return String(error);
  } catch {
    // not JSON: the body itself says it
  }
  return body || response.statusText;
}

/** Seconds to wait from a `Retry-After` header: delay-seconds or an HTTP date. */
export function retryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  if (/^\s*\d+\s*$/.test(value)) return Number(value);
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, (when - now) / 1000);
}

function withSlash(base: string): string {
  return base.endsWith("/") ? base : `${base}/`;
}

/** Exponential backoff with equal jitter, reset by every update received. */
class Retry {
  private failures = 0;
  private since: number | null = null;

  constructor(
    private readonly backoff: Backoff,
    private readonly signal: AbortSignal | undefined,
  ) {}

  reset(): void {
    this.failures = 0;
    this.since = null;
  }

  async wait(cursor: string | null, error: Interrupted | null): Promise<void> {
    const now = Date.now() / 1000;
    this.since ??= now;
    const limit = this.backoff.giveUpAfterS;
    if (limit !== null && now - this.since > limit) {
      throw new SourceUnavailable(cursor, now - this.since);
    }
    const ceiling = Math.min(this.backoff.maxS, this.backoff.initialS * 2 ** this.failures);
    this.failures += 1;
    let delay = ceiling / 2 + Math.random() * (ceiling / 2);
    if (error?.retryAfterS != null) delay = Math.max(delay, error.retryAfterS);
    await sleep(delay, this.signal);
  }
}

function sleep(seconds: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, seconds * 1000);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
