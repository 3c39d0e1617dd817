"""verl adapter: ``ParaVTAgentLoop`` (``paravt.learners.adapters.verl.agent_loop``, registered as ``paravt``) plays ParaVT
episodes in verl's agent-loop rollout (tested against verl==0.9.1's CPU-importable API); ``LocalServerManager``
answers verl's ``generate`` with a transformers model so the loop runs on CPU.

``paravt.learners.adapters.verl.agent_loop`` imports verl at module level (verl's hydra ``_target_`` loads it); this package
does not.
"""

from paravt.learners.adapters.verl.local_server import LocalServerManager

__all__ = ["LocalServerManager"]
