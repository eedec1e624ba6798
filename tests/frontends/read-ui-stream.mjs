// Reads terminus's UI message stream with the AI SDK's own code and prints what it built, as JSON.
//
//   node read-ui-stream.mjs <ai6|ai7> read <url> <token>
//     DefaultChatTransport.reconnectToStream (the SDK's SSE parsing and its uiMessageChunkSchema
//     validation), then readUIMessageStream: a line once the stream is open, then the message
//     it ends with, every chunk type it accepted, and every error it reported.
//   node read-ui-stream.mjs <ai6|ai7> validate < chunks.json
//     The types of the chunks (a JSON array on stdin) that the version's uiMessageChunkSchema
//     rejects.
//   node read-ui-stream.mjs <ai6|ai7> chat <url> <token> <cut_ms>
//     useChat's core (AbstractChat) resuming the open turn, stopped <cut_ms> after its stream opened, as a page
//     that is reloaded mid-turn, then a new chat with the messages the first one held resuming
//     again: the messages each one ended with.
import process from "node:process";

const [version, command, url, token, cutMs] = process.argv.slice(2);
const ai = await import(version);

let announced = false;
let connected;
const connection = new Promise((resolve) => {
  connected = resolve;
});

// The first response's arrival is announced on a line of its own: the test waits for it.
async function announcing(...request) {
  const response = await fetch(...request);
  if (!announced) {
    announced = true;
    process.stdout.write(JSON.stringify({ connected: true }) + "\n");
    connected();
  }
  return response;
}

function transport() {
  return new ai.DefaultChatTransport({
    api: "http://127.0.0.1:1/unused",
    fetch: announcing,
    prepareReconnectToStreamRequest: () => ({
      api: url,
      headers: { authorization: `Bearer ${token}` },
    }),
  });
}

async function read() {
  const errors = [];
  const types = [];
  const stream = await transport().reconnectToStream({ chatId: "chat" });
  if (stream === null) {
    return { status: 204 };
  }
  const seen = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        types.push(chunk.type);
        controller.enqueue(chunk);
      },
    }),
  );
  let message = null;
  try {
    for await (const snapshot of ai.readUIMessageStream({
      stream: seen,
      onError: (error) => errors.push(String(error?.message ?? error)),
    })) {
      message = snapshot;
    }
  } catch (error) {
    errors.push(String(error?.message ?? error));
  }
  return { status: 200, message, types, errors };
}

class State {
  constructor(messages) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(value) {
    return structuredClone(value);
  }
}

function newChat(messages, errors, data) {
  return new ai.AbstractChat({
    id: "chat",
    transport: transport(),
    state: new State(messages),
    onError: (error) => errors.push(String(error?.message ?? error)),
    onData: (part) => data.push(part.data?.state),
  });
}

async function chat() {
  const question = { id: "q", role: "user", parts: [{ type: "text", text: "hi" }] };
  const errors = [];
  const data = [];
  const first = newChat([question], errors, data);
  const cut = connection.then(() => new Promise((resolve) => setTimeout(resolve, Number(cutMs))));
  await Promise.race([first.resumeStream(), cut]);
  first.stop();
  const held = structuredClone(first.messages);
  const second = newChat(structuredClone(held), errors, data);
  await second.resumeStream();
  return {
    status: second.status,
    held,
    messages: second.messages,
    errors,
    data,
  };
}

async function validate() {
  let text = "";
  for await (const part of process.stdin) {
    text += part;
  }
  const schema = ai.uiMessageChunkSchema;
  const checked = typeof schema === "function" ? schema() : schema;
  const rejected = [];
  for (const chunk of JSON.parse(text)) {
    const result = await checked.validate(chunk);
    if (!result.success) {
      rejected.push(chunk.type);
    }
  }
  return { rejected: [...new Set(rejected)] };
}

const commands = { read, chat, validate };
const found = await commands[command]();
process.stdout.write(JSON.stringify(found) + "\n");
