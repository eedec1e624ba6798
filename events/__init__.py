"""The event contract of terminus: inbound events, outbound frames and records, and their codec.

Pure: no I/O, no clock, no randomness.
"""
