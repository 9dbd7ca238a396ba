"""Offline quality-evaluation data: BIG-bench fetch, dataset loaders, multi-chunk prompts, metrics.

Fetch the data once with ``python -m load_tests.eval.fetch``; everything else works offline.
"""
