"""The long fuzz of ``VideoToolEnv`` (``python -m pytest benchmarks/fuzz/test_fuzz_env.py -s``)."""
