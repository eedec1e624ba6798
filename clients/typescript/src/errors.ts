// Every error this package throws, one tree (the Python SDK's names where both have one):
//
//   SubscriberError            the root
//     SubscriptionRefused      a final no from the gateway (status, reason): retrying cannot help
//       SubscriptionDenied     401/403: the token does not grant it
//     SourceUnavailable        the gateway kept failing past the backoff
//     UnreadableFrame          a frame that is no frame
//     TurnFailed               runTurn: the workers failed the turn (`error`, the typed payload)
//     TurnCancelled            runTurn: the turn was cancelled (a user's Stop)
//     TurnRefused              runTurn: the turn id is no turn of this session
//     NoDecision               runTurn: no decision within `decisionTimeoutS`
import type { LLMErrorPayload } from "./contract.js";

/** Root of the client's errors (the Python SDK's `SubscriberError` tree). */
export class SubscriberError extends Error {
  override name = "SubscriberError";
}

/** A final no from the gateway (a 3xx, or a 4xx other than 429): retrying cannot succeed. */
export class SubscriptionRefused extends SubscriberError {
  override name = "SubscriptionRefused";
  constructor(
    readonly status: number,
    readonly reason: string,
  ) {
    super(`${status}: ${reason}`);
  }
}

/** 401 or 403: the token does not grant this session. */
export class SubscriptionDenied extends SubscriptionRefused {
  override name = "SubscriptionDenied";
}

/** The gateway kept failing for longer than the backoff allows; `cursor` is where to resume. */
export class SourceUnavailable extends SubscriberError {
  override name = "SourceUnavailable";
  constructor(
    readonly cursor: string | null,
    readonly waitedS: number,
  ) {
    super(`source unavailable for ${waitedS.toFixed(1)}s (resume after ${cursor})`);
  }
}

/** A frame this client cannot read (a newer server's frame kind, or corrupt data). */
export class UnreadableFrame extends SubscriberError {
  override name = "UnreadableFrame";
  constructor(
    readonly cursor: string,
    readonly reason: string,
  ) {
    super(`unreadable frame at ${cursor}: ${reason}`);
  }
}

/** The workers failed the turn; `error` is the typed error every subscriber of the session got. */
export class TurnFailed extends SubscriberError {
  override name = "TurnFailed";
  constructor(
    readonly turnId: string,
    readonly error: LLMErrorPayload,
  ) {
    super(`turn ${turnId} failed: ${error.type}: ${error.message}`);
  }
}

/** The turn was cancelled (by a user, or an operator) before it finished. */
export class TurnCancelled extends SubscriberError {
  override name = "TurnCancelled";
  constructor(
    readonly turnId: string,
    readonly messageId: string | null,
  ) {
    super(`turn ${turnId} was cancelled`);
  }
}

/** The workers refused the turn's entries: its id is no turn of this session (`reason`); start
 * the turn again under a new id. */
export class TurnRefused extends SubscriberError {
  override name = "TurnRefused";
  constructor(
    readonly turnId: string,
    readonly reason: string,
  ) {
    super(`turn ${turnId} refused: ${reason}`);
  }
}

/** The workers decided nothing about the turn within `decisionTimeoutS`. */
export class NoDecision extends SubscriberError {
  override name = "NoDecision";
  constructor(
    readonly turnId: string,
    readonly waitedS: number,
  ) {
    super(`no decision about turn ${turnId} within ${waitedS} s`);
  }
}
