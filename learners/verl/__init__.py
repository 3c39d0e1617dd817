"""verl adapter: ``ParaVTAgentLoop`` (registered as ``paravt``) plays ParaVT episodes in verl's agent-loop
rollout (tested against verl==0.9.1's CPU-importable API); ``LocalServerManager`` runs it on CPU.

Import ``learners.verl.agent_loop`` only where verl is installed (it imports verl at module level, as verl's
hydra ``_target_`` needs)."""
