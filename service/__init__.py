"""The imperative shell: CLI, Redis runtime, gateway."""
