// The producer routes of one turn on the gateway (docs/producers.md, "Producers over HTTP"): an
// attempt's POST, the events between attempts, the persisted message; each with the gateway's
// failure model (a cut, a 5xx or a 429 waited out with backoff, a 4xx final).
import { type Backoff, check, Interrupted, Retry, withSlash } from "../backoff.js";
import type { PersistedMessage } from "../contract.js";
import { SubscriptionRefused } from "../errors.js";

/** The gateway's answer once an attempt is published. */
export interface Posted {
  session_id: string;
  turn_id: string;
  step: number;
  attempt: number;
  next_seq: number;
  /** The commands stream's position before the attempt's first event: its decision comes after. */
  commands_from: string;
}

/** An event published between attempts (a tool's outcome, or the end of the turn). */
export type TurnEvent =
  | { type: "tool-result"; tool_call_id: string; output: string }
  | { type: "tool-error"; tool_call_id: string; error: string }
  | { type: "turn-ended"; reason: string };

const PAGE = 100;

/** One turn's producer routes, under a producer token of its session. */
export class TurnRoutes {
  constructor(
    readonly base: string,
    readonly token: string,
    readonly session: string,
    readonly turn: string,
    readonly fetch: typeof globalThis.fetch,
    readonly backoff: Backoff,
  ) {}

  url(tail: string): URL {
    const path = `v1/sessions/${encodeURIComponent(this.session)}/turns/${encodeURIComponent(this.turn)}/${tail}`;
    return new URL(path, withSlash(this.base));
  }

  auth(token: string = this.token): Record<string, string> {
    return { Authorization: `Bearer ${token}` };
  }

  /** POST one attempt, its body streamed as it comes; once: a streamed body cannot be sent twice.
   * A final no throws `SubscriptionRefused`, anything else `Interrupted`. */
  async postAttempt(headers: Record<string, string>, body: ReadableStream<Uint8Array> | null): Promise<Posted> {
    const init = { method: "POST", headers: { ...this.auth(), ...headers }, body, duplex: "half" };
    let response: Response;
    try {
      response = await this.fetch(this.url("attempts"), init as RequestInit);
    } catch (error) {
      throw new Interrupted(String(error));
    }
    await check(response);
    return (await response.json()) as Posted;
  }

  /** POST an attempt with no body (a transport error), retried until the gateway answers; null
   * when the attempt exists already (409: an earlier POST of it got through, or the turn ended). */
  async postBodiless(headers: Record<string, string>): Promise<Posted | null> {
    return this.retried(async () => {
      try {
        return await this.postAttempt(headers, null);
      } catch (error) {
        if (error instanceof SubscriptionRefused && error.status === 409) return null;
        throw error;
      }
    });
  }

  /** Publish `events` as the current attempt's next ones. */
  async postEvents(events: TurnEvent[], nextSeq: number | null): Promise<void> {
    const body = JSON.stringify(nextSeq === null ? { events } : { events, next_seq: nextSeq });
    const headers = { ...this.auth(), "content-type": "application/json" };
    await this.retried(async () => {
      await check(await this.fetched(this.url("events"), { method: "POST", headers, body }));
    });
  }

  /** The session's persisted message `id`, read with a reader token (a producer token reads
   * nothing); the newest pages first, where a message just concluded is. */
  async message(readToken: string, id: string): Promise<PersistedMessage> {
    const url = new URL(`v1/sessions/${encodeURIComponent(this.session)}/messages`, withSlash(this.base));
    const page = async (offset: number): Promise<{ messages: PersistedMessage[]; total: number }> =>
      this.retried(async () => {
        url.searchParams.set("offset", String(offset));
        url.searchParams.set("limit", String(PAGE));
        const response = await this.fetched(url, { headers: this.auth(readToken) });
        await check(response);
        return (await response.json()) as { messages: PersistedMessage[]; total: number };
      });
    const { total } = await page(0);
    for (let offset = Math.max(0, total - PAGE); ; offset = Math.max(0, offset - PAGE)) {
      const found = (await page(offset)).messages.find((message) => message.message_id === id);
      if (found !== undefined) return found;
      if (offset === 0) throw new SubscriptionRefused(404, `message ${id} of turn ${this.turn} is not stored`);
    }
  }

  private async fetched(url: URL, init: RequestInit): Promise<Response> {
    try {
      return await this.fetch(url, init);
    } catch (error) {
      throw new Interrupted(String(error));
    }
  }

  /** `call` until it returns or throws a final error; `Interrupted` is waited out. */
  async retried<T>(call: () => Promise<T>): Promise<T> {
    const retry = new Retry(this.backoff, undefined);
    while (true) {
      try {
        return await call();
      } catch (error) {
        if (!(error instanceof Interrupted)) throw error;
        await retry.wait(null, error);
      }
    }
  }
}
