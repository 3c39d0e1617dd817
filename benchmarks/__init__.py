"""Benchmarks: pytest-benchmark suites (``test_*.py`` here) and the reports built from them."""
