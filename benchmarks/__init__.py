"""Benchmarks, kept in the repository and out of the wheel (run them from a checkout):

- ``perf/``: pytest-benchmark suites (``test_bench_*.py``), memory and load benchmarks, and ``report.py`` (ratios
  against the reference path measured side by side in one run);
- ``fuzz/``: the long fuzz of ``VideoToolEnv`` under every protocol;
- ``gpu/``: what a step costs at real size (``gpu_step``), the OpenRLHF executor's episode at any size
  (``openrlhf_episode``) and the first GPU session's runbook (``gpu_session.sh``).
"""
