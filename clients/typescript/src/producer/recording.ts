// One attempt being recorded: which attempt it is, the gateway POST its response goes into, and
// the signal that stops its request when the workers decide first. runTurn binds it to the
// async context of the app's attempt function (AsyncLocalStorage, the Python tee's ContextVar),
// so a `terminusFetch` made once, wherever the app made its provider, knows which attempt a
// request belongs to.
import { AsyncLocalStorage } from "node:async_hooks";
import type { Posted, TurnRoutes } from "./gateway.js";

export const bound = new AsyncLocalStorage<Recording>();

const MAX_TEXT = 1_000; // characters of a header value the gateway keeps

export class Recording {
  /** Aborted when the workers decide while the request runs (a cancel, the stall timer's retry). */
  readonly abort = new AbortController();
  /** The gateway's answer to the attempt's POST, once one is made. */
  posted: Promise<Posted> | null = null;
  /** The provider its request named, once the tee has seen it. */
  provider: string | null = null;
  private ends: (() => void)[] = [];

  constructor(
    readonly routes: TurnRoutes,
    readonly step: number,
    readonly attempt: number,
    readonly maxAttempts: number | null,
  ) {}

  /** The form of this attempt's POST (docs/producers.md), with `more` headers. */
  headers(provider: string, model: string, more: Record<string, string> = {}): Record<string, string> {
    const form: Record<string, string> = {
      "x-terminus-provider": provider,
      "x-terminus-step": String(this.step),
      "x-terminus-attempt": String(this.attempt),
      ...more,
    };
    if (model) form["x-terminus-model"] = headerText(model);
    if (this.maxAttempts !== null && this.step === 1 && this.attempt === 1) {
      form["x-terminus-max-attempts"] = String(this.maxAttempts);
    }
    return form;
  }

  /** POST the attempt: `body` streams to the gateway as the app reads its copy. Only the first
   * request of an attempt is recorded; false for any later one. */
  post(headers: Record<string, string>, body: ReadableStream<Uint8Array> | null, end?: () => void): boolean {
    if (this.posted !== null) return false;
    this.posted = this.routes.postAttempt(headers, body);
    this.posted.catch(() => undefined); // awaited by runTurn once the attempt function is done
    if (end) this.ends.push(end);
    return true;
  }

  /** The attempt function is done: what the app did not read of the body is a cut. */
  finish(): void {
    for (const end of this.ends.splice(0)) end();
  }
}

/** `text` as a header value: printable ASCII, within the gateway's bound. */
export function headerText(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, "?").slice(0, MAX_TEXT) || "?";
}
