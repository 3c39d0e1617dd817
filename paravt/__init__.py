"""``python -m paravt``: the ``paravt`` command line, for environments where the console script is not on
PATH. The code lives in ``scripts.cli``; the libraries are ``paravt_env`` (the env) and ``learners``."""
