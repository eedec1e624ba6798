// A session's updates from a terminus gateway, in order, each exactly once, across cuts: the
// Python SDK's `subscribe` with a `GatewaySource` (service/sdk/subscriber.py), on fetch, so it
// runs in browsers and in Node 20.
import { type Backoff, check, DEFAULT_BACKOFF, Interrupted, Retry, withSlash } from "./backoff.js";
import { eventsOf } from "./sse.js";
import { decoded, UnknownFrames, type Update } from "./update.js";

export { type Backoff, DEFAULT_BACKOFF, retryAfter } from "./backoff.js";

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
  for await (const event of eventsOf(response.body)) {
    const update = event.data ? decoded(event.id, event.data, unknown) : null;
    if (update !== null) yield update;
  }
}
