"""ParaVT-Gym's heavy half, one installed root beside the light gym ``paravt_env``.

    paravt.cli  ->  paravt.experiments  ->  paravt.evaluation  ->  {paravt.learners, paravt.baselines}  ->  paravt_env

An arrow means "may import". ``paravt.learners`` trains (GRPO, PARA-GRPO, the cold start, the engine adapters);
``paravt.baselines`` holds scripted agents; ``paravt.evaluation`` is ``paravt eval``; ``paravt.experiments`` the
studies built on them (``paravt repro``, the dispatch benchmark, probes). Heavy stacks (torch, transformers) are
imported by the modules that need them, never by a package's ``__init__``.
"""
