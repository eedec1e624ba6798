// The app's own server hands terminus's UI message stream to a stock `useChat`: one call per
// route (a Next.js route handler, or any server that answers with a standard `Response`), the
// session's token kept on the server, the body streamed through untouched.

/** Which way the gateway sends an attempt: `hold` (every `ai` version) or `reset` (live, for an
 * app whose bundled `ai` is >= 7.0.70); see docs/frontends.md. */
export type UiStreamMode = "hold" | "reset";

export interface UiStreamOptions {
  /** The gateway's base URL, e.g. `http://terminus:8000`. */
  gateway: string;
  /** The session's token: it goes upstream only, never to the browser. */
  token: string;
  sessionId: string;
  /** The turn to stream; without it, the session's open turn (useChat's resume; 204 if none). */
  turnId?: string;
  mode?: UiStreamMode;
  /** Aborting it (pass the incoming request's signal) closes the upstream stream. */
  signal?: AbortSignal;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

/** The header the AI SDK's chat transport looks for on a UI message stream. */
export const UI_MESSAGE_STREAM_HEADER = "x-vercel-ai-ui-message-stream";

// Hop-by-hop headers, and those describing the bytes as they crossed the upstream connection:
// fetch has already undone the encoding, and the server framing this answer sets its own.
// The gateway's CORS headers name the browser origins allowed to call the gateway, not the app.
const DROPPED = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-encoding",
  "content-length",
  "date",
  "server",
]);

/** The gateway's URL for the turn (or, without `turnId`, the session's open turn). */
export function uiMessageStreamUrl(options: Omit<UiStreamOptions, "token">): string {
  const session = encodeURIComponent(options.sessionId);
  const turn = options.turnId === undefined ? "" : `/turns/${encodeURIComponent(options.turnId)}`;
  const url = new URL(`v1/sessions/${session}${turn}/ui-message-stream`, withSlash(options.gateway));
  url.searchParams.set("mode", options.mode ?? "hold");
  return url.toString();
}

/** The gateway's answer as the app's own: status and headers kept (without the hop-by-hop
 * and CORS ones), the body streamed as it arrives, a 204 passed through; a 200 always says
 * `x-vercel-ai-ui-message-stream: v1`. */
export async function uiMessageStreamResponse(options: UiStreamOptions): Promise<Response> {
  const upstream = await (options.fetch ?? fetch)(uiMessageStreamUrl(options), {
    headers: { authorization: `Bearer ${options.token}`, accept: "text/event-stream" },
    signal: options.signal,
  });
  const headers = new Headers();
  upstream.headers.forEach((value, name) => {
    if (!DROPPED.has(name) && !name.startsWith("access-control-")) headers.set(name, value);
  });
  if (upstream.status === 204) {
    await upstream.body?.cancel();
    return new Response(null, { status: 204, headers });
  }
  if (upstream.ok) headers.set(UI_MESSAGE_STREAM_HEADER, "v1");
  return new Response(upstream.body, { status: upstream.status, statusText: upstream.statusText, headers });
}

/** What useChat's `DefaultChatTransport` POSTs: the chat's id, its messages, why it sends, and
 * whatever the app added with the transport's `body`. */
export interface ChatRequestBody {
  id: string;
  messages: unknown[];
  trigger?: "submit-message" | "regenerate-message";
  messageId?: string;
  [field: string]: unknown;
}

export interface ChatRoutesOptions {
  gateway: string;
  /** The token for a session, minted or looked up on the server. */
  token: (sessionId: string) => string | Promise<string>;
  /** Start the turn for this chat with the app's own producer; the turn id it returns is
   * streamed. The chat's id is the session's id. */
  startTurn: (chat: ChatRequestBody, request: Request) => string | Promise<string>;
  mode?: UiStreamMode;
  fetch?: typeof fetch;
}

/** Next.js's second handler argument: `params` is a promise from Next.js 15, an object before. */
export interface RouteContext {
  params: Promise<{ id: string }> | { id: string };
}

export interface ChatRoutes {
  /** `POST /api/chat`: start the turn, answer with its UI message stream. */
  POST: (request: Request) => Promise<Response>;
  /** `GET /api/chat/[id]/stream`: useChat's resume, the session's open turn from `start`
   * (204 when none is open). */
  GET: (request: Request, context: RouteContext) => Promise<Response>;
}

/** The two routes `useChat` calls, each a handler to export as is. */
export function chatRoutes(options: ChatRoutesOptions): ChatRoutes {
  const stream = async (request: Request, sessionId: string, turnId?: string) =>
    uiMessageStreamResponse({
      gateway: options.gateway,
      token: await options.token(sessionId),
      sessionId,
      turnId,
      mode: options.mode,
      signal: request.signal,
      fetch: options.fetch,
    });
  return {
    async POST(request) {
      const chat = (await request.json()) as ChatRequestBody;
      if (typeof chat?.id !== "string" || chat.id === "") {
        return Response.json({ error: "the chat's id is required" }, { status: 400 });
      }
      return stream(request, chat.id, await options.startTurn(chat, request));
    },
    async GET(request, context) {
      return stream(request, (await context.params).id);
    },
  };
}

function withSlash(base: string): string {
  return base.endsWith("/") ? base : `${base}/`;
}
