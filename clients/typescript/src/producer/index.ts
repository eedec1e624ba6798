// The producer's side, for Node (it binds attempts with node:async_hooks, so browsers import the
// package's main entry only): keep your AI SDK provider, tee its streams into terminus through
// the gateway, and run a turn until the workers call it final (docs/producers.md, "Node").
export {
  NoDecision,
  SourceUnavailable,
  SubscriptionDenied,
  SubscriptionRefused,
  TurnCancelled,
  TurnFailed,
  TurnRefused,
} from "../errors.js";
export type { TurnEvent, Posted } from "./gateway.js";
export { runTurn } from "./run.js";
export type { Attempt, AttemptFunction, RunTurnOptions, ToolOutcome } from "./run.js";
export { providerOf, terminusFetch } from "./tee.js";
export type { TerminusFetchOptions } from "./tee.js";
