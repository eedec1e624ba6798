// What every reader of the gateway shares: the backoff between reconnects, how an answer's status
// becomes a final no (401/403, another 4xx) or a cut to wait out (a 5xx, a 429 after its
// Retry-After), and the base URL's trailing slash.
import { SourceUnavailable, SubscriptionDenied, SubscriptionRefused } from "./errors.js";

/** Delays between reconnects: doubling from `initialS` up to `maxS`, with jitter; after
 * `giveUpAfterS` of failures in a row (null: never) `SourceUnavailable` is thrown. */
export interface Backoff {
  initialS: number;
  maxS: number;
  giveUpAfterS: number | null;
}

export const DEFAULT_BACKOFF: Backoff = { initialS: 0.05, maxS: 5, giveUpAfterS: null };

/** A failure worth retrying: the connection went, a 5xx, a 429 (`retryAfterS`). */
export class Interrupted extends Error {
  constructor(
    reason: string,
    readonly retryAfterS: number | null = null,
  ) {
    super(reason);
  }
}

/** Nothing if `response` is 200 (or one of `ok`); else the error it is: final, or to retry. */
export async function check(response: Response, ok: readonly number[] = [200]): Promise<void> {
  const status = response.status;
  if (ok.includes(status)) return;
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

export function withSlash(base: string): string {
  return base.endsWith("/") ? base : `${base}/`;
}

/** Exponential backoff with equal jitter, reset by every success. */
export class Retry {
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

/** Resolves after `seconds`, or at once when `signal` aborts. */
export function sleep(seconds: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, seconds * 1000);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    if (signal?.aborted) done();
    else signal?.addEventListener("abort", done, { once: true });
  });
}
