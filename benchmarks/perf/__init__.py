"""Performance: pytest-benchmark suites, memory and load benchmarks, and their reports."""
