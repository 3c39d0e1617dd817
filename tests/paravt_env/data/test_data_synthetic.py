"""Synthetic needle videos: determinism, exact event pixels and timing, answerable questions, the Tool
Necessity Gap, resumable generation, index videos, and ``paravt synth``. Frames are decoded with PyAV
directly (not through ``paravt_env.video``)."""

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from paravt_env.data import SynthConfig, generate_dataset, load_samples
from paravt_env.data.index_video import decode_index, index_image, make_index_video
from paravt_env.data.synth_drawing import shape_mask
from paravt_env.data.synth_plan import PALETTE, QUESTION_KINDS, SHAPES, plan_video
from paravt_env.data.synth_questions import make_samples

REPO = Path(__file__).resolve().parents[3]
SMALL = dict(min_duration=24.0, max_duration=40.0)


def decode(path, width=None, height=None):
    """All frames (RGB uint8), their times, and which are keyframes."""
    images, times, keys = [], [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            images.append(frame.to_ndarray(format="rgb24", width=width, height=height))
            times.append(float(frame.pts * stream.time_base))
            keys.append(frame.key_frame)
    return np.stack(images), np.array(times), np.array(keys)


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def nearest_colour(rgb):
    return min(PALETTE, key=lambda c: float(np.abs(np.array(PALETTE[c]) - rgb).sum()))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    return out, generate_dataset(out, SynthConfig(n=4, seed=3, **SMALL), progress=False)


def test_same_seed_same_bytes_across_processes(dataset, tmp_path):
    out, samples = dataset
    # Another process, through the CLI: x264 once coded the first GOP differently from run to run.
    cmd = [sys.executable, "-m", "paravt", "synth", "--out", str(tmp_path), "--n", "4", "--seed", "3",
           "--min-duration", "24", "--max-duration", "40", "--no-progress"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"wrote 4 videos .* and .*samples\.jsonl", proc.stdout)
    assert (out / "samples.jsonl").read_bytes() == (tmp_path / "samples.jsonl").read_bytes()
    for s in samples:
        assert digest(s.video_path) == digest(tmp_path / Path(s.video_path).name)
    other = generate_dataset(tmp_path / "other", SynthConfig(n=4, seed=4, **SMALL), progress=False)
    assert [(s.question, s.events) for s in other] != [(s.question, s.events) for s in samples]


def test_samples_match_their_videos(dataset):
    out, samples = dataset
    assert load_samples(out) == samples
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert all(not Path(r["video_path"]).is_absolute() for r in rows)  # relative to the dataset folder
    assert json.loads((out / "synth_config.json").read_text())["seed"] == 3
    for s in samples:
        images, times, keys = decode(s.video_path)
        assert 24.0 <= s.duration <= 40.0 and len(images) == round(s.duration * 2)
        assert images.shape[1:] == (224, 224, 3)
        np.testing.assert_allclose(times, np.arange(len(images)) / 2)
        # keyframes every 2 s exactly: none inserted at events (an overview that prefers keyframes would
        # otherwise find the needles by chance far too often)
        assert np.flatnonzero(keys).tolist() == list(range(0, len(images), 4))
        assert 2 <= len(s.events) <= 4
        assert len({e.attributes["colour"] for e in s.events}) == len(s.events)
        assert len({e.attributes["shape"] for e in s.events}) == len(s.events)
        for a, b in zip(s.events, s.events[1:], strict=False):
            assert a.end + 1.0 < b.start  # in time order, apart
        for e in s.events:
            assert 2.0 <= e.end - e.start <= 6.0 and 0 < e.start < e.end < s.duration
            assert e.attributes["size"] >= 224 // 5


def test_events_are_in_the_pixels_exactly_when_recorded(dataset):
    """Inside [start, end) the event's colour fills its shape; one frame outside, nothing is saturated."""
    _, samples = dataset
    for s in samples:
        images, times, _ = decode(s.video_path)
        saturation = images.max(axis=3).astype(int) - images.min(axis=3)
        on = np.zeros(len(images), bool)
        for e in s.events:
            a = e.attributes
            inside = np.flatnonzero((times >= e.start) & (times < e.end))
            assert len(inside) == round((e.end - e.start) * 2)
            on[inside] = True
            mask = shape_mask(a["shape"], a["size"])
            for f in inside:
                box = images[f, a["y"] : a["y"] + a["size"], a["x"] : a["x"] + a["size"]].astype(int)
                mean = box[mask].mean(axis=0)
                assert np.abs(mean - PALETTE[a["colour"]]).max() < 20, (s.id, e.label, f, mean)
        assert saturation[~on].max() < 40  # background and distractors stay grey
        assert (saturation[on] > 120).any(axis=(1, 2)).all()


def test_needle_free_copies_keep_the_samples_and_lose_every_needle(dataset, tmp_path):
    """``needles_visible=False``: the same questions, answers and event times, no saturated pixel anywhere,
    and a file name of its own (a blind control must never reuse the real videos' cache)."""
    root, samples = dataset
    blank = generate_dataset(tmp_path / "blank", SynthConfig(n=4, seed=3, needles_visible=False, **SMALL), progress=False)
    assert [(s.question, s.answer, s.events) for s in blank] == [(s.question, s.answer, s.events) for s in samples]
    assert {Path(s.video_path).name for s in blank}.isdisjoint(Path(s.video_path).name for s in samples)
    for s in blank:
        images, _, _ = decode(s.video_path)
        assert (images.max(axis=3).astype(int) - images.min(axis=3)).max() < 40
    # the two cache keys differ; at its default the field leaves the key (and earlier cached files) as it was
    assert SynthConfig(n=4, seed=3, **SMALL).video_key() != SynthConfig(n=4, seed=3, needles_visible=False, **SMALL).video_key()


@pytest.mark.parametrize("what", ["colour", "shape"])
def test_counterfactual_copies_change_every_needle_in_the_pixels_and_nothing_else(dataset, tmp_path, what):
    """``counterfactual``: every needle another colour (or shape), unique in its video, drawn in the pixels at the
    same time, place and size; open-ended questions about the other attribute read the same and their answer
    follows the change; a file name of its own."""
    root, samples = dataset
    kinds = ("oe_colour",) if what == "colour" else ("oe_shape",)
    base = generate_dataset(tmp_path / "base", SynthConfig(n=4, seed=3, question_kinds=kinds, **SMALL), progress=False)
    cfg = SynthConfig(n=4, seed=3, question_kinds=kinds, counterfactual=what, **SMALL)
    changed = generate_dataset(tmp_path / "cf", cfg, progress=False)
    assert {Path(s.video_path).name for s in base}.isdisjoint(Path(s.video_path).name for s in changed)
    attr = "colour" if what == "colour" else "shape"
    for old, new in zip(base, changed, strict=True):
        assert old.id == new.id and old.question == new.question and old.answer != new.answer
        assert new.extra["counterfactual"] == what
        values = [e.attributes[attr] for e in new.events]
        assert len(set(values)) == len(values)
        for e0, e1 in zip(old.events, new.events, strict=True):
            assert (e0.start, e0.end) == (e1.start, e1.end) and e0.attributes[attr] != e1.attributes[attr]
            keep = {k: v for k, v in e0.attributes.items() if k != attr}
            assert keep == {k: v for k, v in e1.attributes.items() if k != attr}
        images, times, _ = decode(new.video_path)
        for e in new.events:  # the new colour (and the shape's mask) on screen during the event
            a = e.attributes
            f = int(np.flatnonzero(times >= (e.start + e.end) / 2)[0])
            box = images[f, a["y"] : a["y"] + a["size"], a["x"] : a["x"] + a["size"]].astype(int)
            assert np.abs(box[shape_mask(a["shape"], a["size"])].mean(axis=0) - PALETTE[a["colour"]]).max() < 20
    with pytest.raises(ValueError, match="counterfactual"):
        SynthConfig(counterfactual="size")


@pytest.mark.parametrize("side", [112, 56])
def test_colours_survive_downscaling(dataset, side):
    _, samples = dataset
    for s in samples[:2]:
        images, times, _ = decode(s.video_path, width=side, height=side)
        for e in s.events:
            a = e.attributes
            f = int(np.flatnonzero(times >= (e.start + e.end) / 2)[0])
            scale = side / 224
            y0, x0 = int(a["y"] * scale), int(a["x"] * scale)
            n = max(int(a["size"] * scale), 1)
            mask = shape_mask(a["shape"], n)
            mean = images[f, y0 : y0 + n, x0 : x0 + n][mask].astype(int).mean(axis=0)
            assert nearest_colour(mean) == a["colour"], (side, e.label, mean)


def test_tool_necessity_gap_from_the_plans():
    """Uniform overviews of 4-8 frames see few events; 64 frames see most: calling crop_video pays off."""
    cfg = SynthConfig(n=300, seed=11)
    seen = {}
    for k in (4, 8, 64):
        hits = total = 0
        for i in range(cfg.n):
            plan = plan_video(i, cfg)
            t = (np.arange(k) + 0.5) * plan.duration / k
            for nd in plan.needles:
                total += 1
                hits += bool(np.any((t >= nd.start) & (t < nd.end)))
        seen[k] = hits / total
    assert seen[4] < 0.2 and seen[8] < 0.25 and seen[64] > 0.6, seen


def test_every_question_has_exactly_one_right_answer():
    """Re-derive each answer from the recorded events and the question text alone."""
    cfg = SynthConfig(n=120, seed=2, questions_per_video=4, min_duration=30, max_duration=90)
    kinds = set()
    for i in range(cfg.n):
        plan = plan_video(i, cfg)
        for s in make_samples(plan, cfg):
            kinds.add(s.extra["kind"])
            labels = [e.label for e in s.events]
            by_shape = {e.attributes["shape"]: e for e in s.events}
            by_colour = {e.attributes["colour"]: e for e in s.events}
            if s.question_type == "mcq":
                assert len(s.options) == 4 == len(set(s.options)) and s.answer in "ABCD"
                picked = s.options["ABCD".index(s.answer)]
            kind = s.extra["kind"]
            if kind in ("mcq_colour", "oe_colour"):
                shape = next(sh for sh in SHAPES if f" {sh} " in f" {s.question} ")
                truth = by_shape[shape].attributes["colour"]
                assert (picked if kind == "mcq_colour" else s.answer) == truth
                assert (
                    kind == "oe_colour"
                    or sum(o in by_colour and by_colour[o] is by_shape[shape] for o in s.options) == 1
                )
            elif kind in ("mcq_shape", "oe_shape"):
                colour = next(c for c in PALETTE if f" {c} " in f" {s.question} ")
                truth = by_colour[colour].attributes["shape"]
                assert (picked if kind == "mcq_shape" else s.answer) == truth
            elif kind == "mcq_count":
                assert picked == str(len(s.events))
            elif kind == "mcq_order" and "first" in s.question:
                shown = [o for o in s.options if o in labels]
                assert picked == min(shown, key=labels.index)
            elif kind == "mcq_order":
                before = re.search(r"after the (\w+ \w+)\?", s.question).group(1)
                assert picked == labels[labels.index(before) + 1]
            else:
                assert s.question_type == "tvg"
                start, end = json.loads(s.answer)
                label = re.search(r"When does the (\w+ \w+) appear", s.question).group(1)
                e = s.events[labels.index(label)]
                assert (start, end) == (pytest.approx(e.start, abs=0.05), pytest.approx(e.end, abs=0.05))
            assert set(s.extra["relevant_events"]) <= set(labels)
    assert kinds == set(QUESTION_KINDS)


def test_resumable_and_atomic(tmp_path):
    cfg = SynthConfig(n=2, seed=5, **SMALL)
    first = generate_dataset(tmp_path, cfg, progress=False)
    stamps = {s.video_path: Path(s.video_path).stat().st_mtime_ns for s in first}
    more = generate_dataset(tmp_path, SynthConfig(n=3, seed=5, **SMALL), progress=False, workers=2)
    assert [s.video_path for s in more[:2]] == list(stamps)
    assert all(Path(p).stat().st_mtime_ns == t for p, t in stamps.items())  # kept, not re-encoded
    assert more[:2] == first and len(load_samples(tmp_path)) == 3
    assert not list(tmp_path.glob("*.part"))
    # a different encoding setting is a different file, never a stale one
    other = generate_dataset(tmp_path, SynthConfig(n=1, seed=5, crf=40, **SMALL), progress=False)
    assert other[0].video_path not in stamps


def test_shapes_differ():
    masks = {s: shape_mask(s, 64) for s in SHAPES}
    for a in SHAPES:
        for b in SHAPES:
            if a != b:
                iou = (masks[a] & masks[b]).sum() / (masks[a] | masks[b]).sum()
                assert iou < 0.85, (a, b, iou)
    with pytest.raises(ValueError, match="unknown shape"):
        shape_mask("hexagon", 10)


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="min_duration"):
        SynthConfig(min_duration=100, max_duration=50)
    with pytest.raises(ValueError, match="question_kinds"):
        SynthConfig(question_kinds=("nope",))
    with pytest.raises(ValueError, match="min_duration=10.0 s cannot hold min_events=2"):
        SynthConfig(min_duration=10.0, max_duration=30.0)
    with pytest.raises(ValueError, match="size"):
        SynthConfig(size=225)


# --- index videos -------------------------------------------------------------------------------------------
def test_index_video_round_trip(tmp_path):
    path = make_index_video(tmp_path / "index.mp4", 40, fps=10, size=(96, 128), gop=12, bframes=2)
    for w, h in [(None, None), (56, 56), (28, 28), (224, 168)]:
        images, times, _ = decode(path, width=w, height=h)
        assert [decode_index(im) for im in images] == list(range(40)), (w, h)
        np.testing.assert_allclose(times, np.arange(40) / 10)
    assert decode_index(index_image(54321, 64, 64)) == 54321
    blended = ((index_image(3, 64, 64).astype(int) + index_image(12, 64, 64)) // 2).astype(np.uint8)
    with pytest.raises(ValueError, match="not a clean index frame"):
        decode_index(blended)


# --- CLI ----------------------------------------------------------------------------------------------------
def test_cli_synth(tmp_path, capsys):
    from paravt.cli import main

    argv = ["synth", "--out", str(tmp_path / "a"), "--n", "2", "--seed", "1", "--min-duration", "24",
            "--max-duration", "30", "--fps", "3", "--size", "112", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    assert "wrote 2 videos" in capsys.readouterr().out
    samples = load_samples(tmp_path / "a")
    assert len(samples) == 2 and all(s.extra["synth"]["fps"] == 3 for s in samples)
    images, times, _ = decode(samples[0].video_path)
    assert images.shape[1:3] == (112, 112) and np.allclose(np.diff(times), 1 / 3)
    assert main(["synth", "--out", str(tmp_path / "b"), "--min-duration", "10", "--max-duration", "5"]) == 1
    assert "min_duration" in capsys.readouterr().err


def test_two_processes_filling_one_cache_at_once_both_succeed(tmp_path):
    """Two ``paravt train`` runs of one recipe start together and synthesise the same cached videos: each
    writes its own part file and renames a whole one (one shared ``.part`` name let a writer rename the
    other's file away: "No such file or directory: ...mp4.part")."""
    script = ("import sys; from paravt_env.data import SynthConfig, generate_dataset; "
              f"generate_dataset(sys.argv[1], SynthConfig(n=4, seed=9, **{SMALL!r}), progress=False)")  # fmt: skip
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stderr=subprocess.PIPE, text=True)
             for _ in range(3)]  # fmt: skip
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert not list(tmp_path.glob("*.part"))
    alone = generate_dataset(tmp_path / "alone", SynthConfig(n=4, seed=9, **SMALL), progress=False)
    for s in alone:
        assert (tmp_path / Path(s.video_path).name).read_bytes() == Path(s.video_path).read_bytes()
