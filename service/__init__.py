"""The imperative shell: the Redis runtime, the gateway, the SDK and the command line.

Every error this package raises on purpose derives from `TerminusError`; a subclass that also
means a standard failure keeps that base too (a bad setting is a `ValueError` as well):

TerminusError
 +-- SettingsError (ValueError)        a setting cannot be read; names the variable
 +-- ShapeError                        the deployment's recorded shape refuses this process
 |    +-- ShapeMismatch (ValueError)   a set partition count disagrees; names what to set
 |    +-- ContractAhead                a producer is ahead of the workers' contract
 +-- EmbeddedRedisError (RuntimeError) the embedded redis-server did not start
 +-- LeaseLost                         the partition's lease moved: the owner ends
 +-- SnapshotError                     a stored snapshot cannot be read
 +-- ArchiveError                      the archive refused a write or lacks an object
 |    +-- ArchiveConflict, ArchiveMissing
 +-- TokenError                        a gateway token is malformed, forged or expired
 +-- BadCursor, BadParam (ValueError)  a client's cursor or query parameter (400)
 +-- TurnArchived (LookupError)        the turn is in the archive, not in Redis (410)
 +-- SubscriberTooSlow, SubscriptionBroken   a gateway subscriber must resume
 +-- SubscriberError                   the subscriber SDK's (service/sdk/updates.py)
 +-- Interrupted                       a subscriber source was cut; `subscribe` resumes
 +-- AttemptOrderError (ValueError)    a producer started an attempt the workers would refuse
 +-- TurnFailed, TurnCancelled         the turn runner's ends other than a message
 +-- NoDecision (TimeoutError)         the workers decided nothing within the runner's timeout
 +-- PhaseError (AssertionError)       a partition owner moved outside its table: a bug
 +-- CommandError, SimulationError, TranscriptError   the command line's, one line each

`CommitAlreadyApplied` is the one exception: it is a redis-py `ConnectionError`, so that every
handler of a lost connection handles a re-sent commit too (service/fold/commit.py).
"""


class TerminusError(Exception):
    """Root of every error the service raises on purpose."""
