"""Helpers shared by the test tiers (issue 16: one copy of each, not one per test module)."""
