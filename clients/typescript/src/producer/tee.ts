// Keep your SDK, in Node: `terminusFetch()` is a fetch for an AI SDK provider (`createAnthropic({
// fetch })`, `createOpenAI`, `createGoogleGenerativeAI`). Outside a turn it is the real fetch.
// Inside runTurn's attempt function, the attempt's first request goes to the provider as usual,
// and its response is split: one copy for the SDK, unchanged, and the same bytes, as the SDK
// reads them, streamed to the gateway's `POST .../attempts`, which runs the provider's adapter
// (service/sdk/tee.py is the Python twin). What happened is reported as it happened:
//
// - a 2xx body, read to its end or cut (the read fails, or the app stops reading): the POST's
//   body ends there, and the workers judge it by its terminal proof;
// - a non-2xx answer: its status and headers in `x-terminus-upstream-*`, its body as the SDK
//   reads it (to raise its APICallError);
// - no answer at all: `x-terminus-transport-error`, and the SDK gets the fetch's own error.
//
// The body the SDK reads is already decoded (fetch decodes gzip, deflate, br), so the gateway is
// sent no Content-Encoding. Give the SDK `maxRetries: 0`: terminus decides retries, and a retry of
// the SDK's own would be a second request in one attempt, which passes through unrecorded.
import { bound, headerText, type Recording } from "./recording.js";

export interface TerminusFetchOptions {
  /** The fetch that reaches the provider (default: the global one). */
  fetch?: typeof globalThis.fetch;
  /** The provider's adapter (`anthropic`, `openai-chat`, `openai-responses`, `gemini`,
   * `openai-chat:<compat>`, ...); default: read from the request's path. */
  provider?: string;
}

const NULL_BODY = new Set([101, 204, 205, 304]);
const WIRE_HEADERS = new Set(["content-encoding", "content-length", "transfer-encoding", "connection"]);

/** A fetch that tees each turn attempt's response into terminus, and is the plain one elsewhere. */
export function terminusFetch(options: TerminusFetchOptions = {}): typeof globalThis.fetch {
  const real = options.fetch ?? globalThis.fetch;
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const recording = bound.getStore();
    if (recording === undefined || recording.posted !== null) return real(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input));
    const provider = options.provider ?? providerOf(url);
    if (provider === null) {
      throw new TypeError(`terminusFetch: no provider is known for ${url.pathname}: pass terminusFetch({ provider })`);
    }
    recording.provider = provider;
    return teed(recording, real, input, init, recording.headers(provider, modelOf(url, init)));
  };
}

async function teed(
  recording: Recording,
  real: typeof globalThis.fetch,
  input: RequestInfo | URL,
  init: RequestInit | undefined,
  form: Record<string, string>,
): Promise<Response> {
  const signals = [recording.abort.signal, init?.signal, input instanceof Request ? input.signal : null];
  const signal = AbortSignal.any(signals.filter((s): s is AbortSignal => s != null));
  let response: Response;
  try {
    response = await real(input, { ...init, signal });
  } catch (error) {
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    recording.post({ ...form, "x-terminus-transport-error": headerText(reason) }, null);
    throw error;
  }
  if (!response.ok) Object.assign(form, upstream(response));
  const { app, gateway, end } = split(response.body);
  recording.post(form, gateway, end);
  const copy = new Response(NULL_BODY.has(response.status) ? null : app, response);
  Object.defineProperty(copy, "url", { value: response.url });
  return copy;
}

function upstream(response: Response): Record<string, string> {
  const headers: Record<string, string> = { "x-terminus-upstream-status": String(response.status) };
  response.headers.forEach((value, name) => {
    if (!WIRE_HEADERS.has(name)) headers[`x-terminus-upstream-header-${name}`] = value;
  });
  return headers;
}

/** Two streams of `source`: `app`, read by the SDK, pulls from the source; each chunk it gets
 * also goes to `gateway`. Both end where the source does; a failed read errors `app` and ends
 * `gateway` cleanly (the gateway closes a cut body as the attempt's end); `end()` or the app's
 * cancel stop both there. */
export function split(source: ReadableStream<Uint8Array> | null): {
  app: ReadableStream<Uint8Array>;
  gateway: ReadableStream<Uint8Array>;
  end: () => void;
} {
  let sink!: ReadableStreamDefaultController<Uint8Array>;
  let open = true;
  const gateway = new ReadableStream<Uint8Array>({
    start: (controller) => {
      sink = controller;
    },
    cancel: () => {
      open = false; // the gateway answered early (a refusal): the app reads on
    },
  });
  const reader = source?.getReader();
  const close = (): void => {
    if (open) sink.close();
    open = false;
  };
  const app = new ReadableStream<Uint8Array>(
    {
      pull: async (controller) => {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = reader === undefined ? { done: true, value: undefined } : await reader.read();
        } catch (error) {
          close();
          controller.error(error);
          return;
        }
        if (chunk.done) {
          close();
          controller.close();
          return;
        }
        if (open) sink.enqueue(chunk.value);
        controller.enqueue(chunk.value);
      },
      cancel: async (reason) => {
        close();
        await reader?.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  const end = (): void => {
    if (!open) return;
    close();
    reader?.cancel().catch(() => undefined);
  };
  return { app, gateway, end };
}

/** The adapter for a provider's streaming path, as the AI SDK providers call them. */
export function providerOf(url: URL): string | null {
  const path = url.pathname;
  if (path.endsWith("/messages")) return "anthropic";
  if (path.endsWith("/chat/completions")) return "openai-chat";
  if (path.endsWith("/responses")) return "openai-responses";
  if (path.includes(":streamGenerateContent")) return "gemini";
  return null;
}

function modelOf(url: URL, init: RequestInit | undefined): string {
  const gemini = /\/models\/([^/:]+):/.exec(url.pathname);
  if (gemini?.[1] !== undefined) return decodeURIComponent(gemini[1]);
  if (typeof init?.body !== "string") return "";
  try {
    const model = (JSON.parse(init.body) as { model?: unknown }).model;
    return typeof model === "string" ? model : "";
  } catch {
    return "";
  }
}
