"""Benchmarks of the catalog: Hub sync and search, one script per figure (see RESULTS.md)."""
