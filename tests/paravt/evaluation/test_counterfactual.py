"""paravt.evaluation.counterfactual: answers on the recoloured copy of a split scored against the new colours
(follows) and the old ones (keeps), over the pairs that are counterfactuals (same question, changed answer)."""

import json

from paravt.evaluation.counterfactual import follow_rates
from paravt_env.data.synth_plan import SynthConfig
from paravt_env.data.synthetic import generate_dataset

SMALL = dict(n=6, seed=11, min_duration=24.0, max_duration=40.0, question_kinds=("oe_colour",))


def test_follows_and_keeps_are_read_against_the_new_and_the_old_answers(tmp_path):
    base = generate_dataset(tmp_path / "base", SynthConfig(**SMALL), progress=False)
    changed = generate_dataset(tmp_path / "cf", SynthConfig(**SMALL, counterfactual="colour"), progress=False)
    old = {s.id: s.answer for s in base}
    rows = []
    for k, s in enumerate(changed):  # 3 follow the pixels, 2 keep the old colour, 1 failed
        if k == 5:
            rows.append({"id": s.id, "prediction": "", "error": "VideoDecodeError: broken"})
        else:
            rows.append({"id": s.id, "prediction": s.answer if k < 3 else old[s.id], "error": None})
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rates = follow_rates(tmp_path / "base", tmp_path / "cf", tmp_path / "eval")
    assert rates == {"follows": 3 / 5, "keeps": 2 / 5, "n": 5, "not_counterfactual": 0, "unscored": 1}


def test_re_asked_questions_are_left_out_and_counted(tmp_path):
    kinds = dict(SMALL, question_kinds=("oe_shape",))  # a recolouring re-asks "what shape is the <colour> thing?"
    generate_dataset(tmp_path / "base", SynthConfig(**kinds), progress=False)
    changed = generate_dataset(tmp_path / "cf", SynthConfig(**kinds, counterfactual="colour"), progress=False)
    (tmp_path / "r.jsonl").write_text("".join(json.dumps({"id": s.id, "prediction": s.answer}) + "\n" for s in changed))
    rates = follow_rates(tmp_path / "base", tmp_path / "cf", tmp_path / "r.jsonl")
    assert rates["n"] == 0 and rates["follows"] is None and rates["not_counterfactual"] == len(changed)


def test_the_rates_need_the_samples_not_the_videos(tmp_path):
    """A run's slim copy (samples.jsonl and results, no videos: results/tiny_cpu/main_job_runs) gives the same
    rates as the run itself."""
    generate_dataset(tmp_path / "base", SynthConfig(**SMALL), progress=False)
    changed = generate_dataset(tmp_path / "cf", SynthConfig(**SMALL, counterfactual="colour"), progress=False)
    (tmp_path / "r.jsonl").write_text("".join(json.dumps({"id": s.id, "prediction": s.answer}) + "\n" for s in changed))
    full = follow_rates(tmp_path / "base", tmp_path / "cf", tmp_path / "r.jsonl")
    for split in ("base", "cf"):
        for video in (tmp_path / split).glob("*.mp4"):
            video.unlink()
    assert follow_rates(tmp_path / "base", tmp_path / "cf", tmp_path / "r.jsonl") == full and full["n"] == len(changed)
