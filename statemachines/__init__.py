"""The turn state machine and its projections: pure folds over inbound events."""
