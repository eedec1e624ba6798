"""Benchmarks of terminus; not part of the installed packages."""
