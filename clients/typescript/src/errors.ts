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
