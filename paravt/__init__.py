"""ParaVT-Gym's heavy half, one installed root beside the light gym ``paravt_env``.

    paravt.cli -> paravt.experiments -> paravt.probes -> paravt.learners -> paravt.evaluation
               -> {paravt.policies, paravt.baselines} -> paravt_env

An arrow means "may import" (docs/reference.md#layout; ``tests/test_layers.py`` checks it). ``paravt.policies`` and
``paravt.baselines`` are the agents the env is played with (models and scripts); ``paravt.evaluation`` is
``paravt eval`` and the dispatch benchmark; ``paravt.learners`` trains (GRPO, PARA-GRPO, the cold start, the engine
adapters); ``paravt.probes`` asks a checkpoint one question each; ``paravt.experiments`` holds the paper's studies
(``paravt repro``, the main job's figures). Heavy stacks (torch, transformers) are imported by the modules that
need them, never by a package's ``__init__`` (docs/reference.md#the-light-import-rule).
"""
