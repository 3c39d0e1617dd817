"""Learners: model policies, rollouts into token-space trajectories, GRPO / PARA-GRPO / SFT, the trainer.

Heavy stacks (torch, transformers) are imported by the modules that need them, never by this package.
"""
