"""The peer: what a user would write instead of terminus, measured by the same harness."""
