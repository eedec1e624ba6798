// The WHATWG event-stream format (https://html.spec.whatwg.org/multipage/server-sent-events.html)
// over a fetch body: any chunking, \r\n, \r or \n line ends (also split across chunks), comments,
// multi-line data, a leading BOM. An event is dispatched at its blank line only: a stream cut
// before it loses the event, and the client resumes from the last id it received.
import { Interrupted } from "./backoff.js";

export interface ServerSentEvent {
  id: string;
  event: string;
  data: string;
}

export class SseParser {
  private buffer = "";
  private started = false;
  private lastId = "";
  private event = "";
  private data: string[] = [];
  private decoder = new TextDecoder("utf-8");

  /** The events completed by `chunk`. */
  feed(chunk: Uint8Array): ServerSentEvent[] {
    return this.lines(this.decoder.decode(chunk, { stream: true }), false);
  }

  /** The stream ended: a line cut short is read, an event without its blank line dropped. */
  finish(): ServerSentEvent[] {
    return this.lines(this.decoder.decode(), true);
  }

  private lines(text: string, ended: boolean): ServerSentEvent[] {
    let buffer = this.buffer + text;
    if (!this.started && buffer.length > 0) {
      this.started = true;
      if (buffer.charCodeAt(0) === 0xfeff) buffer = buffer.slice(1);
    }
    const events: ServerSentEvent[] = [];
    let start = 0;
    for (let at = 0; at < buffer.length; at++) {
      const char = buffer[at];
      if (char !== "\n" && char !== "\r") continue;
      if (char === "\r" && at + 1 === buffer.length && !ended) break; // a \n may follow
      this.line(buffer.slice(start, at), events);
      if (char === "\r" && buffer[at + 1] === "\n") at++;
      start = at + 1;
    }
    this.buffer = buffer.slice(start);
    if (ended && this.buffer) {
      this.line(this.buffer, events);
      this.buffer = "";
    }
    return events;
  }

  private line(line: string, events: ServerSentEvent[]): void {
    if (line === "") {
      if (this.data.length > 0) {
        events.push({ id: this.lastId, event: this.event || "message", data: this.data.join("\n") });
      }
      this.data = [];
      this.event = "";
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") this.data.push(value);
    else if (name === "event") this.event = value;
    else if (name === "id" && !value.includes("\u0000")) this.lastId = value;
  }
}

/** The events of `body` as each completes; a read that fails throws `Interrupted`. The body is
 * cancelled when the caller stops early. */
export async function* eventsOf(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent, void, undefined> {
  const parser = new SseParser();
  const reader = body.getReader();
  try {
    while (true) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        throw new Interrupted(String(error));
      }
      yield* chunk.done ? parser.finish() : parser.feed(chunk.value);
      if (chunk.done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
