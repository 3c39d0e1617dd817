"""TRL adapter: ParaVT episodes as a ``GRPOTrainer`` ``environment_factory`` (tested against trl==1.16.0).

``ParaVTEnvironment`` (the env TRL drives: reset, the ``crop_video`` tool, parallel calls of a turn as one env
step), ``make_reward`` (the env's reward of the generated text), ``grpo_trainer`` (all of it wired, the policy
reading the local trainer's prompt tokens at its pixel budget: ``template``, ``recipe.processor_pixels``). TRL
is imported only by ``grpo_trainer``.
"""

from paravt.learners.adapters.trl.environment import (
    ParaVTEnvironment,
    assistant_turns,
    make_reward,
    paravt_reward,
)
from paravt.learners.adapters.trl.recipe import (
    completion_budget,
    dataset_rows,
    fitting_settings,
    grpo_trainer,
    processor_pixels,
    recipe_env,
)

__all__ = ["ParaVTEnvironment", "assistant_turns", "completion_budget", "dataset_rows", "fitting_settings",
           "grpo_trainer", "make_reward", "paravt_reward", "processor_pixels", "recipe_env"]
