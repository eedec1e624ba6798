"""Benchmarks of terminus; not part of the installed packages.

One package per benchmark, each run as `python -m bench.<name>`: core, e2e, fanout and soak (its
figure: `python -m bench.soak.plot`). bench.common holds what more than one of them uses.
"""
