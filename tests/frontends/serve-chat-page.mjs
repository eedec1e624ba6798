// The app's own server for a stock useChat page, as tests/e2e/test_use_chat_page.py runs it:
//
//   TERMINUS_TOKENS='{"session": "token", ...}' node serve-chat-page.mjs <build_dir> <gateway> [hold|reset]
//
// It bundles chat-page/page.jsx (React, @ai-sdk/react) and the TypeScript package's route
// helper (clients/typescript/src/route.ts, from source) with esbuild into <build_dir>, then
// serves the page and useChat's two routes on a loopback port, the session tokens kept here:
//   POST /api/chat                 chatRoutes' POST: "starts" the turn (prints
//                                  {"started": {"session", "turn"}}: the test plays it), then
//                                  proxies the turn's UI message stream from the gateway;
//   GET  /api/chat/{id}/stream     chatRoutes' GET: the session's open turn, or 204.
// Its first line is {"port": N}.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import path from "node:path";
import process from "node:process";
import { Readable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const [buildDir, gateway, mode = "hold"] = process.argv.slice(2);
const tokens = JSON.parse(process.env.TERMINUS_TOKENS ?? "{}");

await esbuild.build({
  entryPoints: [path.join(here, "chat-page/page.jsx")],
  outfile: path.join(buildDir, "page.js"),
  bundle: true,
  format: "iife",
  platform: "browser",
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "error",
});
await esbuild.build({
  entryPoints: [path.join(here, "../../clients/typescript/src/route.ts")],
  outfile: path.join(buildDir, "route.mjs"),
  bundle: true,
  format: "esm",
  platform: "node",
  logLevel: "error",
});
const { chatRoutes } = await import(pathToFileURL(path.join(buildDir, "route.mjs")).href);

let turns = 0;
const chat = chatRoutes({
  gateway,
  mode,
  token: (session) => tokens[session] ?? "",
  startTurn: (body) => {
    const turn = `t-${++turns}`;
    process.stdout.write(JSON.stringify({ started: { session: body.id, turn } }) + "\n");
    return turn;
  },
});

const files = {
  "/": [path.join(here, "chat-page/index.html"), "text/html; charset=utf-8"],
  "/page.js": [path.join(buildDir, "page.js"), "text/javascript; charset=utf-8"],
};

// Node's request as a fetch Request (closing the page aborts its signal), and back.
function asRequest(incoming, closed) {
  const body = incoming.method === "GET" || incoming.method === "HEAD" ? undefined : Readable.toWeb(incoming);
  const url = new URL(incoming.url, `http://${incoming.headers.host}`);
  return new Request(url, { method: incoming.method, headers: incoming.headers, body, duplex: "half", signal: closed });
}

async function answer(response, outgoing) {
  outgoing.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body === null) {
    outgoing.end();
    return;
  }
  try {
    for await (const chunk of response.body) outgoing.write(chunk);
  } catch {
    // the page went away mid-stream: the upstream stream was aborted with it
  }
  outgoing.end();
}

async function route(incoming, outgoing) {
  const { pathname } = new URL(incoming.url, "http://page");
  const file = files[pathname];
  if (incoming.method === "GET" && file !== undefined) {
    outgoing.writeHead(200, { "content-type": file[1], "cache-control": "no-store" });
    outgoing.end(await readFile(file[0]));
    return;
  }
  const closing = new AbortController();
  outgoing.on("close", () => closing.abort());
  const request = asRequest(incoming, closing.signal);
  const resume = /^\/api\/chat\/([^/]+)\/stream$/.exec(pathname);
  if (incoming.method === "POST" && pathname === "/api/chat") {
    await answer(await chat.POST(request), outgoing);
  } else if (incoming.method === "GET" && resume !== null) {
    await answer(await chat.GET(request, { params: { id: decodeURIComponent(resume[1]) } }), outgoing);
  } else {
    outgoing.writeHead(404);
    outgoing.end();
  }
}

const server = createServer((incoming, outgoing) => {
  route(incoming, outgoing).catch((error) => {
    process.stderr.write(`${error?.stack ?? error}\n`);
    if (!outgoing.headersSent) outgoing.writeHead(502);
    outgoing.end();
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
