// A frame of the session stream as the client hands it on, and the frames it passes over: a
// newer server may add a frame kind (docs/schema.md, "Frames"), and an older frontend must go on
// reading the session, so a kind this client does not know is counted, reported once, skipped.
import type { SessionUpdate } from "./contract.js";
import { cursorAfter } from "./cursor.js";
import { UnreadableFrame } from "./errors.js";

/** A frame's `sessionUpdate` tag, e.g. "agent_message_chunk": the Python SDK's `Update.kind`. */
export type FrameKind = SessionUpdate["sessionUpdate"];

/** One frame of the session stream, its kind and its cursor (the frame's stream id). */
export interface Update {
  cursor: string;
  kind: FrameKind;
  frame: SessionUpdate;
}

// A Record over FrameKind: the compiler fails here when the contract gains a kind.
const KNOWN: Record<FrameKind, true> = {
  agent_message_chunk: true,
  agent_thought_chunk: true,
  tool_call: true,
  tool_call_update: true,
  attempt_discarded: true,
  retrying: true,
  compaction_required: true,
  message_committed: true,
  agent_error: true,
  turn_finished: true,
};

export const KINDS: ReadonlySet<string> = new Set(Object.keys(KNOWN));

/** The frames of a kind this client does not know (a newer server's), passed over: counted per
 * kind in `counts`, each kind reported once, the first time, through `report(kind, cursor)`
 * (default: one `console.warn`). A frame read again after a resume is not counted twice. */
export class UnknownFrames {
  readonly counts = new Map<string, number>();
  /** The newest cursor counted. */
  last: string | null = null;

  constructor(readonly report: (kind: string, cursor: string) => void = warn) {}

  get total(): number {
    let total = 0;
    for (const count of this.counts.values()) total += count;
    return total;
  }

  /** Count the frame of `kind` at `cursor`; report `kind` if it is new. */
  passOver(kind: string, cursor: string): void {
    if (this.last !== null && !cursorAfter(cursor, this.last)) return;
    this.last = cursor;
    const count = this.counts.get(kind);
    this.counts.set(kind, (count ?? 0) + 1);
    if (count === undefined) this.report(kind, cursor);
  }
}

function warn(kind: string, cursor: string): void {
  console.warn(
    `terminus: passing over frames of kind ${JSON.stringify(kind)} (first at ${cursor}): ` +
      "a newer server's; upgrade the client to read them",
  );
}

/** The frame stored as `data` at stream id `cursor`, with its `cursor` set; null, once `unknown`
 * has counted it, for a frame of a kind this client does not know; `UnreadableFrame` for
 * anything else it cannot read (not a JSON object, no kind, no session_id or turn_id). */
export function decoded(cursor: string, data: string, unknown: UnknownFrames): Update | null {
  let frame: unknown;
  try {
    frame = JSON.parse(data);
  } catch (error) {
    throw new UnreadableFrame(cursor, String(error));
  }
  if (typeof frame !== "object" || frame === null || Array.isArray(frame)) {
    throw new UnreadableFrame(cursor, "not a JSON object");
  }
  const fields = frame as Record<string, unknown>;
  const kind = fields.sessionUpdate;
  if (typeof kind !== "string" || kind === "") {
    throw new UnreadableFrame(cursor, `no frame kind: ${JSON.stringify(kind)}`);
  }
  if (!KINDS.has(kind)) {
    unknown.passOver(kind, cursor);
    return null;
  }
  if (typeof fields.turn_id !== "string" || typeof fields.session_id !== "string") {
    throw new UnreadableFrame(cursor, "a frame needs session_id and turn_id");
  }
  return { cursor, kind: kind as FrameKind, frame: { ...fields, cursor } as unknown as SessionUpdate };
}
