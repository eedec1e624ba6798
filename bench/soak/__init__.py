"""The chaos soak, `python -m bench.soak` (see __main__.py), and its figure,
`python -m bench.soak.plot`."""
