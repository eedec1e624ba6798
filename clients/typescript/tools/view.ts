// The live view as plain JSON, the same shape the Python side makes (tests/agreement/views.py),
// so the two LiveSessions can be compared on recorded frame sequences.
import { readFileSync } from "node:fs";
import { LiveSession } from "../src/live.js";
import { decoded, UnknownFrames } from "../src/update.js";

export interface Recorded {
  cursor: string;
  data: string;
}

export function readSequence(path: string): Recorded[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Recorded);
}

export function viewOf(session: LiveSession): unknown {
  const turns = [...session.turns.values()].map((turn) => ({
    turn_id: turn.turnId,
    status: turn.status,
    stop_reason: turn.stopReason,
    error: turn.error,
    messages: [...turn.messages],
    text: turn.text(),
    reasoning: turn.reasoning(),
    parts: [...turn.parts.values()].map((part) => ({
      step: part.step,
      attempt: part.attempt,
      part_id: part.partId,
      kind: part.kind,
      text: part.text,
      tool_name: part.toolName,
      input: part.input,
      status: part.status,
      output: part.output,
      error: part.error,
    })),
  }));
  return { cursor: session.cursor, turns };
}

/** What the TypeScript LiveSession shows after every event of the sequence, in order, and the
 * frames of kinds it does not know that it passed over, per kind. */
export function typescriptView(path: string): unknown {
  const session = new LiveSession();
  const unknown = new UnknownFrames(() => undefined);
  for (const { cursor, data } of readSequence(path)) {
    const update = decoded(cursor, data, unknown);
    if (update !== null) session.apply(update);
  }
  return { ...(viewOf(session) as object), unknown_frames: Object.fromEntries(unknown.counts) };
}
