// One turn produced through the TypeScript client's runTurn, the app's own code an AI SDK
// streamText (ai 7) on @ai-sdk/anthropic or @ai-sdk/openai whose fetch is terminusFetch, against
// a provider at BASE. Run by tests/e2e/test_node_producer.py; prints one JSON line:
// { message, calls, seen, errors } or { rejected: { name, message, error } }.
//
//   node produce-turn.mjs anthropic|openai PROVIDER_BASE GATEWAY PRODUCER_TOKEN READ_TOKEN SESSION TURN
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { streamText } from "ai7";
import { runTurn, terminusFetch } from "../../clients/typescript/build/src/producer/index.js";

const [client, base, gateway, token, readToken, session, turn] = process.argv.slice(2);
const fetch = terminusFetch();
const model =
  client === "anthropic"
    ? createAnthropic({ baseURL: `${base}/v1`, apiKey: "k", fetch })("claude-x")
    : createOpenAI({ baseURL: `${base}/v1`, apiKey: "k", fetch }).chat("gpt-x");

const calls = [];
const seen = [];
const errors = [];
try {
  const message = await runTurn(
    { gateway, token, readToken, session, turn, backoff: { giveUpAfterS: 30 } },
    async (attempt) => {
      calls.push([attempt.step, attempt.number]);
      const result = streamText({
        model,
        prompt: "hi",
        maxRetries: 0, // terminus decides retries
        abortSignal: attempt.signal,
        onError: ({ error }) => errors.push(String(error)),
      });
      for await (const text of result.textStream) seen.push(text);
    },
  );
  console.log(JSON.stringify({ message, calls, seen, errors }));
} catch (error) {
  console.log(
    JSON.stringify({
      rejected: { name: error.name, message: error.message, error: error.error ?? null },
      calls,
      seen,
      errors,
    }),
  );
}
