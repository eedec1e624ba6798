// A turn's next decision, read from the gateway's commands stream (`GET .../commands`, SSE):
// from a position, resumed from that same position after a cut, a 5xx or a 429, until a command
// about the turn comes. Each command's entry id is where the next read starts, so no decision is
// read twice or missed.
import { check, Interrupted, Retry } from "../backoff.js";
import type { ProducerCommand } from "../contract.js";
import { eventsOf } from "../sse.js";
import type { TurnRoutes } from "./gateway.js";

/** A command and the id of its entry on the commands stream. */
export interface Decision {
  id: string;
  command: ProducerCommand;
}

/** The first command about the turn after `from` (null: from when the gateway opens the stream,
 * which may miss one; only a watch that a later exact read supersedes starts there). Aborting
 * `signal` rejects with its reason. */
export async function nextDecision(routes: TurnRoutes, from: string | null, signal: AbortSignal): Promise<Decision> {
  const retry = new Retry(routes.backoff, signal);
  while (true) {
    signal.throwIfAborted();
    try {
      const found = await readOnce(routes, from, signal);
      if (found !== null) return found;
      await retry.wait(from, null); // the stream ended before a command: resume
    } catch (error) {
      signal.throwIfAborted();
      if (!(error instanceof Interrupted)) throw error;
      await retry.wait(from, error);
    }
  }
}

async function readOnce(routes: TurnRoutes, from: string | null, signal: AbortSignal): Promise<Decision | null> {
  const url = routes.url("commands");
  url.searchParams.set("until_decision", "1");
  if (from !== null) url.searchParams.set("from", from);
  let response: Response;
  try {
    response = await routes.fetch(url, { headers: { ...routes.auth(), Accept: "text/event-stream" }, signal });
  } catch (error) {
    throw new Interrupted(String(error));
  }
  await check(response);
  if (response.body === null) throw new Interrupted("no body");
  for await (const event of eventsOf(response.body)) {
    if (event.data) return { id: event.id, command: JSON.parse(event.data) as ProducerCommand };
  }
  return null;
}
