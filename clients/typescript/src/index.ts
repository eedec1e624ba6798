// The terminus client for frontends: follow a session over the gateway's SSE, resuming across
// cuts, and keep a live view in which the parts of discarded attempts vanish; or, from the app's
// own server, hand a stock `useChat` terminus's UI message stream.
export type * from "./contract.js";
export { cursorAfter } from "./cursor.js";
export {
  NoDecision,
  SourceUnavailable,
  SubscriberError,
  SubscriptionDenied,
  SubscriptionRefused,
  TurnCancelled,
  TurnFailed,
  TurnRefused,
  UnreadableFrame,
} from "./errors.js";
export { LivePart, LiveSession, LiveTurn } from "./live.js";
export type { PartKind, ToolStatus, TurnStatus } from "./live.js";
export { chatRoutes, UI_MESSAGE_STREAM_HEADER, uiMessageStreamResponse, uiMessageStreamUrl } from "./route.js";
export type {
  ChatRequestBody,
  ChatRoutes,
  ChatRoutesOptions,
  RouteContext,
  UiStreamMode,
  UiStreamOptions,
} from "./route.js";
export { eventsOf, SseParser } from "./sse.js";
export type { ServerSentEvent } from "./sse.js";
export { DEFAULT_BACKOFF, retryAfter } from "./backoff.js";
export type { Backoff } from "./backoff.js";
export { subscribe } from "./subscribe.js";
export type { SubscribeOptions } from "./subscribe.js";
export { decoded, KINDS, UnknownFrames } from "./update.js";
export type { FrameKind, Update } from "./update.js";
