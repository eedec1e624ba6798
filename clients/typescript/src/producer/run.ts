// runTurn: the TypeScript twin of the Python SDK's TurnRunner (service/sdk/runner.py), for a
// producer that reaches terminus through the gateway only. It runs the app's own attempt
// function; the request it makes through `terminusFetch` is the attempt (service/gateway/
// producing.py publishes it). Order of work, and why:
//
// 1. While the attempt runs, the turn's commands are watched from the last decision's id, so a
//    decision that comes first (a cancel, the stall timer's retry) aborts the request: the
//    workers no longer want it. A decision made on the attempt's proof (the end, a next step)
//    lets the app read its stream to the end first, for up to `settleS`. The first attempt has no such id yet; its watch starts where
//    the gateway opens the stream, and is replaced, once the attempt is published, by a read
//    from the attempt's `commands_from`, the exact position noted before its first event.
// 2. After the attempt, its decision: a retry waits `delay_ms` from when it is read (a decision
//    meanwhile ends the wait), then calls the attempt function again; a compaction awaits
//    `onCompaction`; tools run `tools` and publish their outcomes; the end resolves to the
//    persisted message or rejects with the typed error.
// 3. The gateway's own failures: every read resumes from its position after a cut, a 5xx or a
//    429, with backoff. The attempt's POST streams a body that cannot be sent twice, so if it
//    gets no answer the attempt is POSTed again without a body, as a transport error (the
//    workers decide a retry), or, if the first POST got through after all (409), its decision
//    is read from the last position known.
import { type Backoff, DEFAULT_BACKOFF, sleep } from "../backoff.js";
import type {
  CompactionRequired,
  PersistedMessage,
  ProducerCommand,
  ToolsRequired,
  TurnConcluded,
} from "../contract.js";
import { NoDecision, SubscriptionRefused, TurnCancelled, TurnFailed, TurnRefused } from "../errors.js";
import { type Decision, nextDecision } from "./commands.js";
import { type Posted, type TurnEvent, TurnRoutes } from "./gateway.js";
import { bound, headerText, Recording } from "./recording.js";

/** What the app's attempt function is told about the attempt it makes. */
export interface Attempt {
  readonly session: string;
  readonly turn: string;
  readonly step: number;
  /** 1 for the step's first attempt, then each retry's. */
  readonly number: number;
  /** The workers asked for a shorter context (after `compaction_required`). */
  readonly compact: boolean;
  /** What the previous step's tools gave (after `tools_required`). */
  readonly toolOutcomes: readonly ToolOutcome[];
  /** Aborted when the workers decide while the request runs; terminusFetch passes it on. */
  readonly signal: AbortSignal;
}

/** One tool call's outcome: its output, or its error. */
export interface ToolOutcome {
  toolCallId: string;
  output?: string;
  error?: string;
}

export interface RunTurnOptions {
  /** The gateway's base URL. */
  gateway: string;
  /** A producer token of `session` (`terminus token --producer SESSION`). */
  token: string;
  /** A reader token of `session` (`terminus token SESSION`): a producer token reads nothing, so
   * the proven message is read with this one. */
  readToken: string;
  session: string;
  turn: string;
  /** The turn's cap on attempts, sent with its first. */
  maxAttempts?: number;
  /** Runs the tools a step asked for; null ends the turn instead of a next step. */
  tools?: (required: ToolsRequired) => Promise<ToolOutcome[] | null>;
  onCompaction?: (required: CompactionRequired) => Promise<void>;
  /** Bounds each wait for a decision after an attempt (default: none); past it, `NoDecision`. */
  decisionTimeoutS?: number;
  /** How long the app may go on reading a stream whose end the workers proved (default 10 s). */
  settleS?: number;
  backoff?: Partial<Backoff>;
  /** The fetch that reaches the gateway (default: the global one). */
  fetch?: typeof globalThis.fetch;
}

export type AttemptFunction = (attempt: Attempt) => Promise<unknown>;

const CANNOT_CONTINUE = "the runner cannot send this provider's continuation";
const SETTLE_S = 10;

/** Whether the workers decided on the attempt's terminal proof: its stream is complete. */
function onProof(command: ProducerCommand): boolean {
  if (command.type === "turn_concluded") return command.state === "finished";
  return command.type === "tools_required" || command.type === "continuation_required";
}

/** Until `work` settles, or `ms` have passed. */
async function settled(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([work.then(() => undefined, () => undefined), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

interface Plan {
  step: number;
  attempt: number;
  compact: boolean;
  toolOutcomes: ToolOutcome[];
}

/** Run the turn to its end: the persisted message, or `TurnFailed`, `TurnCancelled`,
 * `TurnRefused`, `NoDecision`; the gateway's final no as `SubscriptionRefused` (or
 * `SubscriptionDenied`), its failing for longer than `backoff.giveUpAfterS` as `SourceUnavailable`. */
export async function runTurn(options: RunTurnOptions, ask: AttemptFunction): Promise<PersistedMessage> {
  const backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
  const fetcher = options.fetch ?? globalThis.fetch;
  const routes = new TurnRoutes(options.gateway, options.token, options.session, options.turn, fetcher, backoff);
  return new Run(options, routes, ask).untilConcluded();
}

class Run {
  private cursor: string | null = null;
  private nextSeq: number | null = null;
  private provider = "anthropic"; // an attempt that made no request names the last one's

  constructor(
    private readonly options: RunTurnOptions,
    private readonly routes: TurnRoutes,
    private readonly ask: AttemptFunction,
  ) {}

  async untilConcluded(): Promise<PersistedMessage> {
    let plan: Plan | null = { step: 1, attempt: 1, compact: false, toolOutcomes: [] };
    let decided = await this.attempt(plan);
    while (true) {
      this.cursor = decided.id;
      const command = decided.command;
      switch (command.type) {
        case "turn_concluded":
          return this.concluded(command);
        case "turn_refused":
          throw new TurnRefused(command.turn_id, command.reason);
        case "retry_scheduled":
          plan = {
            step: command.step,
            attempt: command.attempt,
            compact: false,
            toolOutcomes: plan?.toolOutcomes ?? [],
          };
          break;
        case "compaction_required":
          await this.options.onCompaction?.(command);
          plan = {
            step: command.step,
            attempt: command.attempt,
            compact: true,
            toolOutcomes: plan?.toolOutcomes ?? [],
          };
          break;
        case "tools_required":
          plan = await this.tools(command);
          break;
        case "continuation_required":
          plan = null;
          break;
      }
      if (plan === null) {
        decided = await this.end(command.type === "tools_required" ? "no next step" : CANNOT_CONTINUE);
      } else if (command.type === "retry_scheduled") {
        decided = (await this.pause(command.delay_ms)) ?? (await this.attempt(plan));
      } else {
        decided = await this.attempt(plan);
      }
    }
  }

  /** Run one attempt, watching for a decision meanwhile; then its decision. */
  private async attempt(plan: Plan): Promise<Decision> {
    const routes = this.routes;
    const recording = new Recording(routes, plan.step, plan.attempt, this.options.maxAttempts ?? null);
    const watch = new AbortController();
    const early = nextDecision(routes, this.cursor, watch.signal);
    early.catch(() => undefined);
    const made = this.made(recording, plan);
    made.catch(() => undefined);
    const first = await Promise.race([early.then((d) => ({ d })), made.then((from) => ({ from }))]).catch(
      (error: unknown) => {
        watch.abort();
        recording.abort.abort();
        throw error;
      },
    );
    if ("d" in first) {
      // A decision made on the attempt's proof can come while the app still reads its stream
      // (the gateway publishes what it is sent before the app has read it all): let the app
      // read to the end, for up to `settleS`. Any other decision stops the request now.
      if (onProof(first.d.command)) await settled(made, (this.options.settleS ?? SETTLE_S) * 1000);
      recording.abort.abort();
      await made.catch(() => undefined);
      return first.d;
    }
    if (this.cursor !== null) return this.decision(early, watch);
    watch.abort();
    const exact = new AbortController();
    return this.decision(nextDecision(routes, first.from, exact.signal), exact);
  }

  /** Run the app's function as the attempt; the commands position its decision comes after. */
  private async made(recording: Recording, plan: Plan): Promise<string> {
    const attempt: Attempt = {
      session: this.options.session,
      turn: this.options.turn,
      step: plan.step,
      number: plan.attempt,
      compact: plan.compact,
      toolOutcomes: plan.toolOutcomes,
      signal: recording.abort.signal,
    };
    let failure: unknown = null;
    try {
      await bound.run(recording, () => this.ask(attempt));
    } catch (error) {
      failure = error;
    }
    recording.finish();
    const provider = (this.provider = recording.provider ?? this.provider);
    if (recording.posted === null) {
      const reason = failure === null ? "the attempt made no request" : String(failure);
      recording.post(recording.headers(provider, "", { "x-terminus-transport-error": headerText(reason) }), null);
    }
    return this.published(recording, provider);
  }

  /** The attempt's `commands_from`; if its POST got no answer, it is POSTed again as a
   * transport error, or read from the last position known if it got through (409). */
  private async published(recording: Recording, provider: string): Promise<string> {
    let posted: Posted | null;
    try {
      posted = await (recording.posted as Promise<Posted>);
    } catch (error) {
      if (error instanceof SubscriptionRefused && error.status !== 429) throw error;
      const reason = `the gateway did not take the attempt: ${String(error)}`;
      posted = await this.routes.postBodiless(
        recording.headers(provider, "", { "x-terminus-transport-error": headerText(reason) }),
      );
    }
    if (posted === null) return this.cursor ?? "0-0";
    this.nextSeq = posted.next_seq;
    return posted.commands_from;
  }

  private async decision(read: Promise<Decision>, watch: AbortController): Promise<Decision> {
    const limit = this.options.decisionTimeoutS;
    if (limit === undefined) return read;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        watch.abort();
        reject(new NoDecision(this.options.turn, limit));
      }, limit * 1000);
    });
    try {
      return await Promise.race([read, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Wait out a retry's delay, counted from now; a decision meanwhile ends the wait. */
  private async pause(delayMs: number): Promise<Decision | null> {
    const watch = new AbortController();
    const early = nextDecision(this.routes, this.cursor, watch.signal);
    early.catch(() => undefined);
    const slept = sleep(Math.max(delayMs, 0) / 1000, watch.signal).then(() => null);
    const first = await Promise.race([early, slept]);
    watch.abort();
    return first;
  }

  private async tools(required: ToolsRequired): Promise<Plan | null> {
    if (this.options.tools === undefined) {
      const names = required.tools.map((tool) => tool.tool_name).join(", ");
      throw new TypeError(`turn ${required.turn_id} needs tools run (${names}): pass tools to runTurn`);
    }
    const outcomes = await this.options.tools(required);
    if (outcomes === null) return null;
    await this.routes.postEvents(outcomes.map(eventOf), this.nextSeq);
    return { step: required.step, attempt: 1, compact: false, toolOutcomes: outcomes };
  }

  /** End the turn between steps (`turn-ended`); the workers' conclusion. */
  private async end(reason: string): Promise<Decision> {
    await this.routes.postEvents([{ type: "turn-ended", reason }], this.nextSeq);
    const watch = new AbortController();
    return this.decision(nextDecision(this.routes, this.cursor, watch.signal), watch);
  }

  private async concluded(command: TurnConcluded): Promise<PersistedMessage> {
    if (command.state === "failed" && command.error != null) throw new TurnFailed(command.turn_id, command.error);
    if (command.state === "cancelled") throw new TurnCancelled(command.turn_id, command.message_id ?? null);
    if (command.message_id == null)
      throw new SubscriptionRefused(404, `turn ${command.turn_id} ended without a message`);
    return this.routes.message(this.options.readToken, command.message_id);
  }
}

function eventOf(outcome: ToolOutcome): TurnEvent {
  if (outcome.error !== undefined)
    return { type: "tool-error", tool_call_id: outcome.toolCallId, error: outcome.error };
  return { type: "tool-result", tool_call_id: outcome.toolCallId, output: outcome.output ?? "" };
}
