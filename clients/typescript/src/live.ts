// The live view of a session: exactly the Python SDK's `LiveSession` (service/sdk/live.py),
// which an agreement test holds it to on recorded frame sequences.
import type {
  LLMErrorPayload,
  SessionUpdate,
  ToolCallFrame,
  ToolCallUpdate,
  TurnStatus,
} from "./contract.js";
import { cursorAfter } from "./cursor.js";
import type { Update } from "./update.js";

export type PartKind = "text" | "reasoning" | "tool";
/** From the contract: "streaming", "retrying", "finished", "cancelled" or "failed". */
export type { TurnStatus };
export type ToolStatus = "pending" | "completed" | "error";

/** One part as streamed so far; a tool part also carries the call's latest state. */
export class LivePart {
  chunks: string[] = [];
  toolName: string | null = null;
  input: Record<string, unknown> | null = null;
  status: ToolStatus | null = null;
  output: string | null = null;
  error: string | null = null;

  constructor(
    readonly step: number,
    readonly attempt: number,
    readonly partId: string,
    readonly kind: PartKind,
  ) {}

  get text(): string {
    return this.chunks.join("");
  }
}

/** A turn's kept parts in the order they started, its status and how it ended. */
export class LiveTurn {
  /** Keyed by step, attempt and part id (a tool call's id for a tool). */
  readonly parts = new Map<string, LivePart>();
  status: TurnStatus = "streaming";
  stopReason: string | null = null;
  error: LLMErrorPayload | null = null;
  readonly messages: string[] = [];

  constructor(readonly turnId: string) {}

  text(): string {
    return this.joined("text");
  }

  reasoning(): string {
    return this.joined("reasoning");
  }

  part(step: number, attempt: number, partId: string, kind: PartKind): LivePart {
    this.status = "streaming";
    const key = partKey(step, attempt, partId);
    let part = this.parts.get(key);
    if (part === undefined) {
      part = new LivePart(step, attempt, partId, kind);
      this.parts.set(key, part);
    }
    return part;
  }

  private joined(kind: PartKind): string {
    let text = "";
    for (const part of this.parts.values()) {
      if (part.kind === kind) text += part.text;
    }
    return text;
  }
}

/** The live view of one session's turns, fed with `apply` in cursor order. */
export class LiveSession {
  readonly turns = new Map<string, LiveTurn>();
  cursor: string | null = null;

  /** Fold `update` in; false (and nothing changes) if it is not after the last one. */
  apply(update: Update): boolean {
    if (this.cursor !== null && !cursorAfter(update.cursor, this.cursor)) return false;
    this.cursor = update.cursor;
    const turnId = update.frame.turn_id;
    let turn = this.turns.get(turnId);
    if (turn === undefined) {
      turn = new LiveTurn(turnId);
      this.turns.set(turnId, turn);
    }
    fold(turn, update.frame);
    return true;
  }

  /** The turn's text a UI should show now ("" for a turn not seen). */
  text(turnId: string): string {
    return this.turns.get(turnId)?.text() ?? "";
  }

  reasoning(turnId: string): string {
    return this.turns.get(turnId)?.reasoning() ?? "";
  }

  /** Drop a turn the UI no longer shows (its later frames would start it anew). */
  forget(turnId: string): void {
    this.turns.delete(turnId);
  }
}

function partKey(step: number, attempt: number, partId: string): string {
  return `${step}\u0000${attempt}\u0000${partId}`;
}

function fold(turn: LiveTurn, frame: SessionUpdate): void {
  switch (frame.sessionUpdate) {
    case "agent_message_chunk":
      turn.part(frame.step, frame.attempt, frame.part_id, "text").chunks.push(frame.delta);
      return;
    case "agent_thought_chunk":
      turn.part(frame.step, frame.attempt, frame.part_id, "reasoning").chunks.push(frame.delta);
      return;
    case "tool_call":
    case "tool_call_update":
      tool(turn, frame);
      return;
    case "attempt_discarded":
      for (const partId of frame.part_ids) {
        turn.parts.delete(partKey(frame.step, frame.attempt, partId));
      }
      return;
    case "retrying":
    case "compaction_required":
      turn.status = "retrying";
      return;
    case "message_committed":
      if (!turn.messages.includes(frame.message_id)) turn.messages.push(frame.message_id);
      return;
    case "agent_error":
      turn.status = "failed";
      turn.error = frame.error;
      return;
    case "turn_finished":
      // A stopped turn is not a complete answer: its own status, as in the Python SDK.
      turn.status = frame.stopReason === "cancelled" ? "cancelled" : "finished";
      turn.stopReason = frame.stopReason;
      return;
    default:
      return assertNever(frame);
  }
}

function tool(turn: LiveTurn, frame: ToolCallFrame | ToolCallUpdate): void {
  const part = turn.part(frame.step, frame.attempt, frame.tool_call_id, "tool");
  part.toolName = frame.tool_name;
  part.status = frame.status ?? "pending";
  part.input = frame.input ?? part.input;
  if (frame.sessionUpdate === "tool_call_update") {
    part.output = frame.output ?? null;
    part.error = frame.error ?? null;
  }
}

function assertNever(value: never): never {
  throw new Error(`unhandled frame ${JSON.stringify(value)}`);
}
