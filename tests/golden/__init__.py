"""Golden logs of the inbound contract, one directory per version (README.md)."""
