import type { SessionUpdate } from "./contract.js";
import { UnreadableFrame } from "./errors.js";

/** One frame of the session stream and its cursor (the frame's stream id). */
export interface Update {
  cursor: string;
  frame: SessionUpdate;
}

export const KINDS: ReadonlySet<string> = new Set([
  "agent_message_chunk",
  "agent_thought_chunk",
  "tool_call",
  "tool_call_update",
  "attempt_discarded",
  "retrying",
  "compaction_required",
  "message_committed",
  "agent_error",
  "turn_finished",
]);

/** The frame stored as `data` at stream id `cursor`, with its `cursor` set; `UnreadableFrame`
 * for anything else. */
export function decoded(cursor: string, data: string): Update {
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
  if (typeof fields.sessionUpdate !== "string" || !KINDS.has(fields.sessionUpdate)) {
    throw new UnreadableFrame(cursor, `unknown frame kind ${JSON.stringify(fields.sessionUpdate)}`);
  }
  if (typeof fields.turn_id !== "string" || typeof fields.session_id !== "string") {
    throw new UnreadableFrame(cursor, "a frame needs session_id and turn_id");
  }
  return { cursor, frame: { ...fields, cursor } as unknown as SessionUpdate };
}
