"""The generic episode loop: any agent plays one episode of ``VideoToolEnv`` (or a wrapper of it), and what
happened is recorded. Scripted baselines, model policies and remote agents all play through ``play_episode``."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from .records import prompt_sha, turn_entry, visual_tokens


class Agent(Protocol):
    """What ``play_episode`` drives: ``reset`` after ``env.reset``, then ``act`` before every ``env.step``. An
    agent with ``reads_info = True`` also gets each step's info (listed messages, the next turn's token cap)."""

    def reset(self, obs: dict[str, Any], info: dict[str, Any], sample: Any = None) -> None: ...

    def act(self, obs: dict[str, Any]) -> str: ...


@dataclass
class EpisodeResult:
    """One finished episode."""

    sample_id: str
    question_type: str
    prediction: str
    answer: str
    reward: float
    breakdown: dict[str, float]
    turns: int
    tool_calls: int  # crops executed
    tool_calls_requested: int
    frame_budget: int
    wall_s: float
    terminated: bool
    truncated: bool
    actions: list[str] = field(default_factory=list, repr=False)
    final_info: dict[str, Any] = field(default_factory=dict, repr=False)
    """The last step's info (the release protocol's ``final_response`` and ``error`` are there)."""
    duration: float | None = None
    """The video's length in seconds, as the env read it."""
    system_prompt_sha: str | None = None
    """A hash of the system prompt shown (what two runs must share to be comparable)."""
    overview: list[float] = field(default_factory=list, repr=False)
    """Timestamps of the overview frames shown at reset."""
    overview_visual_tokens: int = 0
    """The visual tokens of those frames (``paravt_env.records.visual_tokens``)."""
    steps: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """Per turn: ``text`` (the action), ``crops`` (the env's ``info["crops"]``), ``frames`` (timestamps of the
    frames the observation after it carried), ``parse_problems`` and ``timing`` (seconds)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def play_episode(
    env, agent: Agent, *, seed: int | None = None, options: dict[str, Any] | None = None
) -> EpisodeResult:
    """Reset ``env`` (a ``VideoToolEnv`` or a gymnasium wrapper of one), let ``agent`` play to the end."""
    t0 = time.perf_counter()
    obs, info = env.reset(seed=seed, options=options)
    overview = [round(float(t), 3) for t in obs["timestamps"]]
    overview_tokens = visual_tokens(obs["frames"])
    base_info_duration = info.get("duration")
    system_sha = prompt_sha(info)
    steps: list[dict[str, Any]] = []
    base = env.unwrapped
    sample = base.sample
    agent.reset(obs, info, sample)
    requested = executed = turns = 0
    actions = []
    terminated = truncated = False
    reward = 0.0
    reads_info = getattr(agent, "reads_info", False)  # model agents take each step's info (listed messages)
    while not (terminated or truncated):
        action = agent.act(obs, info) if reads_info else agent.act(obs)
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        gens = getattr(agent, "generations", None)  # model agents keep their generations (token counts)
        last = gens[-1] if gens else None
        ids = getattr(last, "token_ids", None)
        tokens = len(ids) if ids else getattr(last, "completion_tokens", None)
        steps.append(turn_entry(action if isinstance(action, str) else repr(action), info, obs["timestamps"],
                                tokens=tokens, prompt_tokens=getattr(last, "prompt_tokens", None),
                                visual=visual_tokens(obs["frames"])))  # fmt: skip
        turns += 1
        requested += info["tool_calls"]["requested"]
        executed += info["tool_calls"]["executed"]
    return EpisodeResult(
        sample_id=sample.id,
        question_type=sample.question_type,
        prediction=info.get("prediction", ""),
        answer=sample.answer,
        reward=float(reward),
        breakdown=dict(info.get("reward_breakdown", {})),
        turns=turns,
        tool_calls=executed,
        tool_calls_requested=requested,
        frame_budget=int(info["frame_budget"]),
        wall_s=time.perf_counter() - t0,
        terminated=terminated,
        truncated=truncated,
        actions=actions,
        final_info={k: v for k, v in info.items() if k in ("final_response", "error", "messages")},
        duration=base_info_duration,
        system_prompt_sha=system_sha,
        overview=overview,
        overview_visual_tokens=overview_tokens,
        steps=steps,
    )
