"""The worker pool: the FastStream app, workers, membership, leases, the pump that steps every
partition owner, the wire its rounds go on, the stall timer, background archiving."""
