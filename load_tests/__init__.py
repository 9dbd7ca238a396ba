"""The benchmark and evaluation harness: load generators, TTFT benchmarks, quality evaluations.

Not part of the served product (gateway, retriever and engine never import it) and independent
of the test suite (it imports nothing from ``tests``; the tests may import it). A run writes into
``load_tests/results/`` unless ``--out`` names another path; see docs/benchmarks.md.
"""
