"""Rollouts: play the env with a model policy and keep each episode in token space for the learners
(``paravt.learners.trajectory``). Every turn of every unfinished episode of a step generates in one batch."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from paravt.learners.trajectory import Trajectory, TrajectoryBuilder, single_turn_trajectory
from paravt.policies.agent import PolicySubAgent
from paravt.policies.hf import HFPolicy
from paravt_env.messages import observation_messages
from paravt_env.records import episode_record, prompt_sha, turn_entry, visual_tokens, with_cost
from paravt_env.rewards import parse_span


def continuing(work: Callable[[int], bool], order: Sequence[int]) -> Iterator[int]:
    """``work(i)`` for each i of ``order`` in turn, on a thread of its own; yields, in order and as each is done,
    the i for which it returned True. What it computes runs beside what the caller does with each i (the next
    turn's prefill while the following envs still step). An error in ``work`` is raised here; a caller that stops
    reading stops the thread after the env it is in."""
    done: queue.Queue = queue.Queue()
    stop = threading.Event()

    def run() -> None:
        try:
            for i in order:
                if stop.is_set():
                    return
                done.put((i, work(i), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the reader
            done.put((None, False, exc))
        done.put((None, False, None))

    thread = threading.Thread(target=run, name="paravt-rollout-envs", daemon=True)
    thread.start()
    try:
        while True:
            i, goes_on, error = done.get()
            if error is not None:
                raise error
            if i is None:
                return
            if goes_on:
                yield i
    finally:
        stop.set()
        thread.join()


def run_episode(
    env, policy: HFPolicy, subagent: Any = None, seed: int | None = None, options: dict[str, Any] | None = None
) -> Trajectory:
    """Play one episode of ``env`` with ``policy``. In "subagent" mode the sub-agent is ``subagent`` if given,
    else the policy itself (weight sharing, as in ParaVT), whose generations are kept in
    ``Trajectory.subagent_trajectories``."""
    return run_group([env], policy, subagent=subagent, seed=seed, options=options)[0]


def run_group(
    envs: Sequence[Any], policy: HFPolicy, subagent: Any = None, seed: int | None = None, options: dict[str, Any] | None = None
) -> list[Trajectory]:
    """Play one episode in each env with batched generation, every env with the same ``options`` (a GRPO group:
    the same prompt with the same K)."""
    return run_batch(envs, policy, [options] * len(envs), subagent=subagent, seed=seed)


def run_batch(
    envs: Sequence[Any], policy: HFPolicy, options: Sequence[dict[str, Any] | None], *, subagent: Any = None,
    seed: int | None = None,
) -> list[Trajectory]:
    """Play one episode in each env (``options[i]`` resets env i): every turn, all unfinished episodes of every
    prompt generate in one batch, so an RL step with P prompts x G rollouts costs one generation per turn
    instead of P. The trajectories come back in env order. The envs' work (resets, tool calls, encoding their
    feedback) runs on a thread of its own, each episode's next prompt prefilled as soon as it is ready
    (``continuing``, ``HFPolicy.generate_as_ready``): the same computation in the same order, the second core
    busy with the envs while the first prefills."""
    if len(options) != len(envs):
        raise ValueError(f"run_batch: {len(envs)} envs but {len(options)} options")
    policy.new_step()  # nothing cached by an earlier step is read (bit-exact resume)
    n = len(envs)
    keys = [("rollout", k) for k in range(n)]  # each episode's cache, kept across its turns
    builders: list[TrajectoryBuilder] = [None] * n  # type: ignore[list-item]
    infos: list[dict[str, Any]] = [{} for _ in envs]
    starts: list[tuple] = [()] * n  # per env: start time, overview timestamps, system prompt hash (the records)
    steps: list[list[dict[str, Any]]] = [[] for _ in envs]
    recorders: list[PolicySubAgent | None] = []
    for env in envs:
        base = env.unwrapped
        recorder = None
        if base.config.tool_result == "subagent":
            if subagent is None:  # weight sharing: the policy itself, its summaries recorded per episode
                recorder = PolicySubAgent(policy, recorder=single_turn_trajectory)
            base.set_subagent(subagent if subagent is not None else recorder)
        recorders.append(recorder)
    # A sub-agent generates inside its env's step, with the policy that the turn's generation holds: those envs
    # run before the generation, not beside it.
    beside = not any(env.unwrapped.config.tool_result == "subagent" for env in envs)
    results: list[dict[str, Any]] = [{} for _ in envs]
    counts = [[0, 0] for _ in envs]  # turns, executed tool calls

    def start(i: int) -> bool:
        obs, info = envs[i].reset(seed=seed, options=options[i])
        history = observation_messages(obs, info)
        builders[i] = TrajectoryBuilder(policy, policy.encode(history), history)
        infos[i] = info
        starts[i] = (time.perf_counter(), [round(float(t), 3) for t in obs["timestamps"]], prompt_sha(info),
                     visual_tokens(obs["frames"]))  # fmt: skip
        return True

    def advance(i: int, gen: Any) -> bool:
        """Env i's step on its turn ``gen``; its feedback encoded where the episode goes on (returned)."""
        builders[i].add_turn(gen)
        obs, reward, term, trunc, info = envs[i].step(gen.text)
        steps[i].append(turn_entry(gen.text, info, obs["timestamps"], tokens=len(gen.token_ids),
                                   prompt_tokens=gen.prompt_tokens, visual=visual_tokens(obs["frames"])))  # fmt: skip
        counts[i][0] += 1
        counts[i][1] += info["tool_calls"]["executed"]
        if term or trunc:
            results[i] = {"reward": reward, "breakdown": info["reward_breakdown"], "truncated": trunc,
                          "prediction": info.get("prediction", ""), "wall_s": time.perf_counter() - starts[i][0]}
            return False
        builders[i].add_feedback(observation_messages(obs, info))
        return True

    work: Callable[[int], bool] = start
    live = list(range(n))
    while live:
        ready = continuing(work, live) if beside else iter([i for i in live if work(i)])
        turn: list[int] = []  # the episodes that go on, in the order their prompts were generated

        def prompts(ready: Iterator[int] = ready, turn: list[int] = turn) -> Iterator[tuple[Any, Any]]:
            for i in ready:
                turn.append(i)
                yield builders[i].encoded, keys[i]

        try:
            gens = policy.generate_as_ready(prompts())
        finally:
            if beside:
                ready.close()  # an error in the generation: the envs' thread stops too
        policy.end_sessions([keys[i] for i in live if i not in turn])
        by_env = dict(zip(turn, gens, strict=True))
        work, live = (lambda i, by_env=by_env: advance(i, by_env[i])), turn
    trajectories = []
    for k, (b, info, res, (turns, calls), rec) in enumerate(zip(builders, infos, results, counts, recorders, strict=True)):
        accuracy = float(res["breakdown"].get("accuracy", 0.0))
        sample = envs[k].unwrapped.sample
        grounding = sample.question_type == "tvg"  # the spans as the reward's accuracy term reads them
        record = episode_record(
            sample, duration=info.get("duration"), frame_budget=int(info["frame_budget"]),
            overview=starts[k][1], turns=steps[k], reward=res["breakdown"], prediction=res["prediction"],
            score=accuracy, correct=accuracy >= 0.5, wall_s=res["wall_s"], system_prompt_sha=starts[k][2],
            overview_visual_tokens=starts[k][3],
            truth_span=parse_span(sample.answer) if grounding else None,
            predicted_span=parse_span(res["prediction"]) if grounding else None,
            epoch=int(info.get("epoch", 0)),
        )  # fmt: skip
        with_cost(record, subagent=envs[k].unwrapped.config.tool_result == "subagent")
        trajectories.append(
            Trajectory(
                input_ids=list(b.encoded.input_ids),
                loss_mask=b.loss_mask,
                logprobs=b.logprobs,
                struct_mask=b.struct,
                encoded=b.encoded,
                reward=float(res["reward"]),
                breakdown=dict(res["breakdown"]),
                frame_budget=int(info["frame_budget"]),
                turns=turns,
                tool_calls=calls,
                sample_id=info["sample_id"],
                epoch=int(info.get("epoch", 0)),
                turn_texts=b.texts,
                truncated=bool(res["truncated"]),
                record=record,
                subagent_trajectories=list(rec.trajectories) if rec is not None else [],
            )
        )
    return trajectories
