"""Benchmarks, each figure measured side by side with its reference: `python -m bench`."""
