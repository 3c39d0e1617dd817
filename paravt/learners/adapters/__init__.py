"""ParaVT episodes on other engines: ``trl/`` (a ``GRPOTrainer`` environment), ``verl/`` (an agent loop and its
dataset export), ``openrlhf/`` (an agent executor and its launcher).

What the three share lives here, once: ``recipe_env.env_options`` (the env a recipe's rollouts build, as the
JSON each engine carries to its rollout workers) and ``budget`` (the tokens and images a recipe's episodes can
need, which sizes each engine's length settings). Each engine package imports its engine lazily or at module
level only where that engine loads it (verl's hydra ``_target_``, OpenRLHF's ``--train.agent_func_path``).
"""
