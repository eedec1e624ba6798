"""What the tee (service/sdk/tee.py) costs an app per streamed byte: `python -m bench.tee`.

The same official SDK client streams the same large answer from a loopback provider (a process
of its own, bench/tee/serve.py) twice over: once plain, once through `TeeTransport` in a
`TurnRunner` turn, publishing into Redis while a worker process concludes the turn. The two
alternate, in the same run, so that the ratio between them is what the machine's noise leaves
alone. What is measured is the app's process: its CPU (all its threads) per byte of the body,
and the wall time until the SDK's stream ended and until the turn was proven. The provider,
the worker and Redis are other processes, not counted.
"""
