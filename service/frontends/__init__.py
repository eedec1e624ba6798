"""Frontends that speak another protocol: projections of a turn's session frames.

Order of work (DESIGN section 7): a frontend built on the AI SDK's `useChat` reads the UI message
stream, not terminus's frames. The gateway reads a turn's frames from the session stream, as for
`/updates`, and folds them through `UiStream` (service/frontends/ui_stream.py) into UI message
chunks (service/frontends/chunks.py); the route only encodes them as SSE. The fold is pure (no
clock, ids or I/O) and depends on nothing but the frames, so a resumed or replayed stream is the
live one, byte for byte: that is how a reload mid-turn resumes without a duplicated part.

Why two modes: the UI message stream cannot retract a part before ai 7.0.70 (`reset-step`), and
older clients reject a chunk they do not know. `hold` therefore sends an attempt's parts only once
the frames prove it (`message_committed`), and meanwhile transient status parts; `reset` streams
live and withdraws a discarded attempt with `reset-step`. Either way, no chunk of a discarded
attempt is sent after it is known to be discarded, and replay never sends one at all in `hold`.
"""
