"""The probe gate: ``paravt repro`` starts its RL arms only from a cold start that sees and calls the tool.

The paper's comparison is about what RL does to a policy's tool use: vanilla GRPO drops the calls, PARA-GRPO
keeps them. On a cold start that cannot see the needle the arms compare blind policies and every verdict is
noise (the first repro's cold start scored 0.06 held-out and 0.000 from a 64-frame overview). So,
after the cold start and before any RL step, four checks on the held-out videos (``GateConfig``):

- **it sees a crop**: accuracy after one oracle crop (``paravt.probes.perception``) minus accuracy with the
  same crop's frames grey (the blank-video rate) is at least ``min_crop_lift``;
- **it sees the overview**: accuracy answering from a ``overview_budget``-frame overview alone minus the best
  constant answer's accuracy on the same videos is at least ``min_overview_lift``. The answer is forced after
  the policy's own think block (the probe's ``overview_forced``): with its calls merely suppressed, a cold
  start that checks the overview before answering writes no answer (measured: 0.025 that way, against a
  first sentence naming the right colour in 18 of the 27 overviews that showed the needle);
- **it calls**: κ, executed crops per rollout, of the step-1 rollouts of each arm in ``arms`` (the rollouts RL
  starts from, at the training temperature), averaged over ``kappa_seeds`` RL seeds (the run's own first, so
  the gate sees the step 1 its runs train on, then the next unused ones: one step is 8-16 rollouts, and over
  13 seeds of the repro cold start vanilla GRPO's step-1 κ ranged 0.25-2.62), is at least ``min_kappa``;
- **it writes its calls**: forced to open a call turn (``paravt.probes.calls``), the share of turns
  sampled at the training temperature that are well formed and whose calls inside the video all run is at
  least ``min_call_writing``. κ counts the crops that ran, not the ones the policy meant: the first repro cold
  start that saw (gate version 2) passed κ for PARA-GRPO while 9 of its 80 forced call turns were well formed
  and 0.088 ran as written (windows such as ``12-10``), so RL compared arms on a tool no policy could aim.

- **it calls by habit** (the tool-neutral design; checked only where ``min_crop_habit`` is set): greedy, answering
  from a ``overview_budget``-frame overview with the tool at hand, the cold start crops in at least that share of
  the held-out episodes, whether or not the overview already shows the event (the paper's SFT cold start calls
  the tool 2.5 times a rollout before RL; the repro_cpu cold start cropped in 2 of 40 such episodes on one
  machine and 20 of 20 on another). This evaluation is the cold start's own at that K
  (``OUT/coldstart/eval_parallel_k64``), reused by the report.

The figures go to ``OUT/coldstart/gate.json`` (reused on a rerun with the same gate) and into the report. A
failed gate stops the run with ``GateFailed`` naming each failed check with its figure and threshold;
``paravt repro --no-gate`` records the figures and goes on.
"""

from __future__ import annotations

import json
import logging
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from paravt_env.storage import DamagedFile, read_json, write_text_atomic

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GateConfig:
    """Thresholds of the probe gate, the same for every arm (the gate runs once, on the shared cold start)."""

    min_crop_lift: float = 0.3
    """Oracle-crop accuracy minus grey-crop accuracy, at least (a blind model scores the same under both)."""
    min_overview_lift: float = 0.2
    """Overview-only accuracy at ``overview_budget`` frames minus the best constant answer's, at least."""
    min_kappa: float = 0.75
    """Executed crops per step-1 rollout, at least, in every checked arm ("around 1 or more")."""
    overview_budget: int = 64
    """The overview the "sees the overview" check answers from: the paper's fixed budget, where skipping the
    tool is a shortcut."""
    arms: tuple[str, ...] = ("vanilla_grpo", "para_grpo")
    """Arms whose step-1 rollouts are checked: the fixed K = 64 arm and the gated one."""
    kappa_seeds: int = 8
    """Step-1 batches per arm, one per RL seed (``kappa_seeds_for``: the run's seeds first): their κ is averaged.
    Over 3 seeds a cold start that calls could fail it by chance: for the repro cold start (mean κ of vanilla
    GRPO 1.07 over seeds 0-12), 46 of the 286 triples of those seeds fall below 0.75, and 1 % of the sets of 8."""
    min_call_writing: float = 0.5
    """Forced call turns sampled at the training temperature that are well formed with every call inside the
    video run, at least (the main job's two-pass cold starts: 0.79-0.84; the one-pass ones, whose RL broke its
    calls: 0.33-0.45, probed on the first 20 held-out videos; the first seeing repro cold start: 0.088)."""
    call_samples: int = 2
    """Sampled forced call turns per held-out video for that check."""
    limit: int | None = None
    """Held-out samples probed (None: all)."""
    min_crop_habit: float | None = None
    """Greedy episodes at ``overview_budget`` frames that crop, at least, on the held-out videos (the tool prior;
    the tool-neutral design: 0.5). None: not checked."""


GATE_VERSION = 4
"""What the saved figures mean; a ``gate.json`` of another version is measured again (1: the overview answered
with calls suppressed; 2: the answer forced after the policy's think; 3: the call-writing check added; 4: κ over
``kappa_seeds`` 8 seeds, the run's first). The habit check is a threshold (``min_crop_habit``), part of the saved
``gate``: a gate saved without it is measured again when it is asked for, and reused when it is not."""


class GateFailed(RuntimeError):
    """The cold start failed the probe gate: its message names each failed check with figure and threshold."""


def gate_path(out: Path) -> Path:
    return Path(out) / "coldstart" / "gate.json"


CHECK_FIELDS = {"name": str, "what": str, "value": (int, float), "threshold": (int, float), "passed": bool, "detail": str}
"""Each check of ``gate.json`` and the type of each of its fields."""


def read_gate(path: Path) -> dict[str, Any]:
    """``gate.json`` as the report and the gate read it: an object whose ``passed`` is a boolean and whose
    ``checks`` are objects of ``CHECK_FIELDS``; anything else is a ``DamagedFile`` naming the file and the field (a
    number written as a string would otherwise fail far away, in a format code)."""
    gate = read_json(path)
    if not isinstance(gate.get("passed"), bool):
        raise DamagedFile(f"{path}: damaged, field 'passed' is {gate.get('passed')!r}, not true or false")
    checks = gate.get("checks")
    if not isinstance(checks, list):
        raise DamagedFile(f"{path}: damaged, field 'checks' is {type(checks).__name__}, not a list")
    for i, check in enumerate(checks):
        if not isinstance(check, dict):
            raise DamagedFile(f"{path}: damaged, checks[{i}] is a {type(check).__name__}, not an object")
        for field, kind in CHECK_FIELDS.items():
            value = check.get(field)
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise DamagedFile(f"{path}: damaged, checks[{i}].{field} is {value!r}")
    return gate


def kappa_seeds_for(run_seeds, n: int) -> list[int]:
    """The ``n`` RL seeds whose step 1 the κ check samples: the run's own first (their step 1 is what its arms
    train on), then the smallest non-negative seeds the run does not use."""
    seeds = list(dict.fromkeys(run_seeds))[:n]
    extra = (s for s in range(n + len(seeds) + 1) if s not in seeds)
    return seeds + [next(extra) for _ in range(n - len(seeds))]


def best_constant_rate(samples) -> float:
    """Accuracy of the best single answer given to every sample (the reward's F1 rule, as the probe scores):
    what a policy that ignores the video can reach."""
    from paravt_env.rewards import answer_accuracy

    answers = sorted({s.answer for s in samples})
    if not answers:
        return 0.0
    return max(sum(answer_accuracy(a, s.answer, s.question_type, "f1") for s in samples) / len(samples) for a in answers)


def measure(out: Path, cfg, gate: GateConfig, progress: bool = False) -> dict[str, Any]:
    """The gate's figures on ``out``'s cold start and held-out videos (probe, constant rate, step-1 κ)."""
    from paravt.experiments.repro.arms import base_config, coldstart_model
    from paravt.experiments.repro.step1 import step1
    from paravt.probes.calls import probe_call_writing
    from paravt.probes.perception import ProbeConfig, load_checkpoint, probe_perception
    from paravt_env import load_samples

    model = coldstart_model(out)
    samples = load_samples(Path(out) / "coldstart" / "heldout", strict=False)
    samples = samples[: gate.limit] if gate.limit else samples
    rollout = base_config(cfg).rollout  # the call-writing check samples as RL's rollouts will
    temperature = rollout.temperature
    policy, env = load_checkpoint(str(model))
    try:
        probe = probe_perception(policy, samples, ProbeConfig(env=env, overview_budgets=(4, gate.overview_budget)),
                                 progress=progress)  # fmt: skip
        writing = probe_call_writing(policy, samples, env, temperatures=(temperature,), per_video=gate.call_samples,
                                     max_new_tokens=rollout.max_new_tokens)  # fmt: skip
    finally:
        del policy
    written = writing["by_temperature"][f"{temperature:g}"]
    constant = best_constant_rate(samples)
    seeds = kappa_seeds_for(cfg.seeds, gate.kappa_seeds)
    step = {}
    for arm in gate.arms:
        rows = [step1(model, arm, seed, cfg) for seed in seeds]
        step[arm] = {"kappa": statistics.fmean(r["kappa"] for r in rows),
                     "compliance": statistics.fmean(r["compliance"] for r in rows), "per_seed": rows}  # fmt: skip
    key = f"K={gate.overview_budget}"
    acc, overview, suppressed = probe["accuracy"], probe["overview_forced"][key], probe["tool_necessity"][key]
    checks = [
        _check("sees a crop", "oracle-crop accuracy - grey-crop accuracy", acc["oracle"] - acc["grey"],
               gate.min_crop_lift, f"oracle {acc['oracle']:.3f}, grey {acc['grey']:.3f}"),
        _check("sees the overview", f"K={gate.overview_budget} overview-only accuracy - best constant answer",
               overview - constant, gate.min_overview_lift,
               f"overview, answer forced {overview:.3f} (calls suppressed {suppressed:.3f}), constant {constant:.3f}"),
        *_habit_checks(out, cfg, gate, progress),
        *(_check(f"calls ({arm})", "κ of the step-1 rollouts", step[arm]["kappa"], gate.min_kappa,
                 f"format compliance {step[arm]['compliance']:.3f}; seeds {', '.join(map(str, seeds))}: κ "
                 + ", ".join(f"{r['kappa']:.2f}" for r in step[arm]["per_seed"])) for arm in gate.arms),
        _check("writes its calls", f"forced call turns at T={temperature:g}: well formed, every call inside the video run",
               written["clean_inside"], gate.min_call_writing,
               f"well formed {written['well_formed']:.3f}; calls per turn run {written['executed_per_turn']:.2f}, "
               f"refused {written['rejected_per_turn']:.2f}; {written['turns']} turns"),
    ]  # fmt: skip
    return {
        "passed": all(c["passed"] for c in checks),
        "checks": checks,
        "probe": {k: v for k, v in probe.items() if k != "rows"},
        "constant_answer": constant,
        "step1": step,
        "call_writing": writing,
        "n": len(samples),
        "gate": asdict(gate),
    }


def _habit_checks(out: Path, cfg, gate: GateConfig, progress: bool = False) -> list[dict[str, Any]]:
    """The tool-prior check (none where ``gate.min_crop_habit`` is None): the cold start's greedy evaluation at the
    gate's K (the report's own, reused), its share of episodes that crop, split by whether the overview showed the
    asked event."""
    if gate.min_crop_habit is None:
        return []
    from paravt.experiments.repro.arms import coldstart_model
    from paravt.experiments.repro.evaluations import eval_dir, evaluate_policy

    k = gate.overview_budget
    target = eval_dir(Path(out) / "coldstart", "parallel", k)
    evaluate_policy(coldstart_model(out), Path(out) / "coldstart" / "heldout", target, cfg, frame_budget=k,
                    progress=progress)  # fmt: skip
    summary = read_json(target / "summary.json")
    split = summary.get("by_overview", {})
    detail = ", ".join(f"overview {name} the event: {part['tool_usage_rate']:.3f} of {part['n']}"
                       for name, part in split.items()) or "no overview split recorded"  # fmt: skip
    return [_check("calls by habit", f"greedy K={k} held-out episodes that crop", summary["tool_usage_rate"],
                   gate.min_crop_habit, f"{detail}; crops per episode {summary['avg_tool_calls']:.2f}; n {summary['n']}")]


def _check(name: str, what: str, value: float, threshold: float, detail: str) -> dict[str, Any]:
    return {"name": name, "what": what, "value": float(value), "threshold": float(threshold),
            "passed": bool(value >= threshold), "detail": detail}  # fmt: skip


def run_gate(out: Path, cfg, gate: GateConfig | None = None, *, enforce: bool = True,
             progress: bool = False) -> dict[str, Any]:  # fmt: skip
    """The gate's result for ``out``'s cold start: read from ``gate.json`` when it was measured with the same
    ``gate``, RL seeds and ``GATE_VERSION``, else measured and saved. With ``enforce`` a failed gate raises ``GateFailed``; without,
    it is logged as a warning."""
    gate = gate or GateConfig()
    path = gate_path(out)
    seeds = kappa_seeds_for(cfg.seeds, gate.kappa_seeds)
    result = None
    if path.is_file():
        try:
            saved = read_gate(path)
        except DamagedFile as exc:  # never overwritten: it is the record the report reads
            raise DamagedFile(f"{exc}: move it aside to measure the gate again") from None
        # a gate saved before the habit check existed did not check it: the same as min_crop_habit None
        saved_gate = {"min_crop_habit": None, **saved.get("gate", {})} if isinstance(saved.get("gate"), dict) else None
        same = (saved.get("version") == GATE_VERSION and saved_gate == json.loads(json.dumps(asdict(gate)))
                and saved.get("seeds") == seeds)  # fmt: skip
        result = saved if same else None
    if result is None:
        logger.info("repro: probe gate on the cold start (%s)", path.parent / "coldstart" / "model")
        result = {**measure(out, cfg, gate, progress), "seeds": seeds, "version": GATE_VERSION}
        write_text_atomic(path, json.dumps(result, indent=2) + "\n")
    if not result["passed"]:
        message = failure_message(result, path)
        if enforce:
            raise GateFailed(message)
        logger.warning("%s (--no-gate: going on)", message)
    return result


def failure_message(result: dict[str, Any], path: Path) -> str:
    failed = [c for c in result["checks"] if not c["passed"]]
    lines = [f"the cold start failed the probe gate ({path}), so RL would compare policies that cannot "
             f"{'see' if any(c['name'].startswith('sees') for c in failed) else 'call the tool'}:"]  # fmt: skip
    lines += [f"  {c['name']}: {c['what']} = {c['value']:.3f} < {c['threshold']:.3f} ({c['detail']})" for c in failed]
    lines.append("Change the cold start (recipe perception.* / sft.*) and use a new --out, or pass --no-gate to run "
                 "the arms anyway.")  # fmt: skip
    return "\n".join(lines)


def to_markdown(result: dict[str, Any]) -> str:
    """The gate's table for the report."""
    rows = ["| check | measure | value | threshold | passed | figures |", "|---|---|---|---|---|---|"]
    rows += [f"| {c['name']} | {c['what']} | {c['value']:.3f} | {c['threshold']:.3f} | "
             f"{'yes' if c['passed'] else '**no**'} | {c['detail']} |" for c in result["checks"]]  # fmt: skip
    return "\n".join(rows) + "\n"
