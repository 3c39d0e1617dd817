"""``paravt view``: the page shows one element per episode and draws every crop and event window where the
records say, checked in a real headless Chromium (no console message at all)."""

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from paravt.baselines import make_baseline
from paravt.cli import main
from paravt.evaluation.harness import evaluate
from paravt.evaluation.store import read_results
from paravt.evaluation.viewer import PAGE, build_page, write_view
from paravt_env import EnvConfig

W, PAD = 1000, 10  # the page's timeline geometry


@pytest.fixture(scope="module")
def evaluated(synth_small, tmp_path_factory):
    _, samples = synth_small
    out = tmp_path_factory.mktemp("view") / "eval"
    evaluate(samples, lambda: make_baseline("detector"), out, EnvConfig(frame_budget=8), progress=False)
    return out


class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.episodes, self.rects, self.current = [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "episode" in (a.get("class") or "").split():
            self.current = a["data-sample-id"]
            self.episodes.append(self.current)
        if tag == "rect":
            self.rects.append((self.current, a))


def test_records_hold_every_crop_the_env_ran(evaluated):
    rows = read_results(evaluated / "results.jsonl")
    assert rows and all(r["episode"]["schema"] == "paravt-episode/1" for r in rows)
    for r in rows:
        ep = r["episode"]
        executed = sum(c["status"] == "executed" for t in ep["turns"] for c in t["crops"])
        assert executed == r["tool_calls"] and len(ep["overview"]) == r["frame_budget"] == ep["frame_budget"]
        assert ep["events"] and all(e["start"] < e["end"] for e in ep["events"])


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium (apt-get install chromium; .ci/run does)")
def test_the_page_draws_every_window_of_the_records_in_a_real_browser(evaluated, tmp_path):
    assert main(["view", str(evaluated), "--out", str(tmp_path / "v.html")]) == 0
    proc = subprocess.run(["chromium", "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0",
                           "--dump-dom", (tmp_path / "v.html").as_uri()], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0
    assert not re.findall(r"CONSOLE.*", proc.stderr), proc.stderr  # no error, no log: the script ran clean
    dom = _Dom()
    dom.feed(proc.stdout)
    records = {r["id"]: r["episode"] for r in read_results(evaluated / "results.jsonl")}
    assert sorted(dom.episodes) == sorted(records)  # one element per episode
    drawn = {}
    for sample_id, a in dom.rects:
        drawn.setdefault((sample_id, a["class"].split()[0]), []).append(a)
    for sample_id, ep in records.items():
        duration = max([ep["duration"] or 0, *ep["overview"], *(e["end"] for e in ep["events"])])

        def x(t, duration=duration):
            return PAD + (W - 2 * PAD) * min(max(t, 0), duration) / duration

        crops = [c for t in ep["turns"] for c in t["crops"] if c["start"] is not None and c["end"] is not None]
        got = drawn.get((sample_id, "crop"), [])
        assert [(float(a["data-start"]), float(a["data-end"])) for a in got] == [(c["start"], c["end"]) for c in crops]
        for a, c in zip(got, crops, strict=True):
            lo, hi = sorted((c["start"], c["end"]))
            assert float(a["x"]) == pytest.approx(x(lo)) and float(a["width"]) == pytest.approx(max(x(hi) - x(lo), 1))
        events = drawn.get((sample_id, "event"), [])
        assert [(float(a["data-start"]), float(a["data-end"])) for a in events] == [(e["start"], e["end"]) for e in ep["events"]]
        for a, e in zip(events, ep["events"], strict=True):
            assert float(a["x"]) == pytest.approx(x(e["start"]))
        if ep["truth_span"]:
            [truth] = drawn[(sample_id, "truth")]
            assert [float(truth["data-start"]), float(truth["data-end"])] == ep["truth_span"]


def test_view_refuses_a_directory_without_evaluations(tmp_path, capsys):
    assert main(["view", str(tmp_path)]) == 1
    assert "holds no evaluation or rollout records" in capsys.readouterr().err


def test_embedded_records_cannot_close_the_script_block(evaluated, tmp_path):
    rows = read_results(evaluated / "results.jsonl")
    rows[0]["episode"]["turns"][0]["text"] = "</script><script>alert(1)</script>"
    run = tmp_path / "eval"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path, counts = write_view(run, thumbs=False)
    page = path.read_text()
    assert counts["episodes"] == len(rows) and page.count("</script>") == PAGE.count("</script>")


def test_a_model_policy_records_its_generated_tokens_per_turn(synth_small, tiny_qwen3, tmp_path):
    pytest.importorskip("torch")
    from paravt.evaluation.policy_specs import make_agent_factory

    _, samples = synth_small
    factory, _ = make_agent_factory(f"hf:{tiny_qwen3}", max_new_tokens=8)
    evaluate(samples[:1], factory, tmp_path / "ev", EnvConfig(frame_budget=4, max_turns=2), progress=False)
    [row] = read_results(tmp_path / "ev" / "results.jsonl")
    turns = row["episode"]["turns"]
    assert turns and all(0 < t["tokens"] <= 8 for t in turns)
    sampling = json.loads((tmp_path / "ev" / "summary.json").read_text())["fingerprint"]["sampling"]
    assert sampling["policy"] == "HFPolicy" and sampling["max_new_tokens"] == 8



ADVERSARIAL = ["<!--<script>", "</script><script>document.title='PWNED'</script>", "<!-- </script> -->", "\u2028\u2029",
               "<img src=x onerror=\"document.title='PWNED'\">", "]]></script>&amp;<b>"]  # fmt: skip


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium (apt-get install chromium; .ci/run does)")
def test_adversarial_texts_and_a_malformed_record_never_blank_the_page(evaluated, tmp_path):
    """Turn texts, questions, ids and paths that would leave a ``<script>`` element, and one record with a wrongly
    typed field: every other episode still draws, the bad one shows as an error card, no script of theirs runs."""
    rows = read_results(evaluated / "results.jsonl")
    for i, r in enumerate(rows):
        bad = ADVERSARIAL[i % len(ADVERSARIAL)]
        r["id"] = r["episode"]["sample_id"] = f"{r['id']}{bad}"
        r["episode"]["question"] = bad + r["episode"]["question"]
        r["episode"]["video"] = f"/videos/{bad}.mp4"
        for t in r["episode"]["turns"]:
            t["text"] = bad + t["text"] + bad
    rows[1]["episode"]["turns"] = "not a list"  # a wrongly typed field
    run = tmp_path / "eval"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path, counts = write_view(run, thumbs=False)
    proc = subprocess.run(["chromium", "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
                           "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0
    dom = _Dom()
    dom.feed(proc.stdout)
    assert sorted(dom.episodes) == sorted(r["episode"]["sample_id"] for r in rows)  # every record has its card
    drawn = proc.stdout.split('<div id="runs">', 1)[1].split("<script", 1)[0]
    assert drawn.count("could not be drawn") == 1
    assert "<title>PWNED" not in proc.stdout and "<img src=" not in proc.stdout  # no injected script ran; text stays text


def test_records_say_which_event_the_question_asks_about(evaluated, synth_small):
    _, samples = synth_small
    relevant = {s.id: set(s.extra["relevant_events"]) for s in samples}
    for r in read_results(evaluated / "results.jsonl"):
        events = r["episode"]["events"]
        assert {e["label"] for e in events if e["asked"]} == relevant[r["id"]] != set()
        assert all(e["asked"] is False for e in events if e["label"] not in relevant[r["id"]])


def test_a_grounding_record_keeps_the_span_its_scorer_read(tmp_path):
    from paravt.evaluation.scoring import predicted_span
    from paravt_env import VideoQASample

    tvg = VideoQASample(id="g", video_path="v.mp4", question="When?", answer="[10.0, 20.0]", question_type="tvg")
    assert predicted_span(tvg, "It happens 12.5 - 18 seconds in", {}, release=False) == (12.5, 18.0)
    assert predicted_span(tvg, "no idea", {}, release=False) is None
    mcq = VideoQASample(id="m", video_path="v.mp4", question="Which?", answer="A", question_type="mcq", options=["a", "b"])
    assert predicted_span(mcq, "[1, 2]", {}, release=False) is None


def test_the_index_accuracy_is_summary_json_s(evaluated, tmp_path):
    """One accuracy everywhere: the index gives what ``paravt eval`` printed and ``summary.json`` holds (the mean
    score: partial credit, an error row 0), not the share of correct episodes; correct / wrong count those."""
    from paravt.evaluation.report import summarize, write_report

    run = tmp_path / "eval"
    shutil.copytree(evaluated, run, ignore=shutil.ignore_patterns("*.lock", "view.html"))
    rows = read_results(run / "results.jsonl")
    rows[0]["score"] = rows[0]["episode"]["score"] = 0.6  # an open answer half right: correct, partial credit
    rows[0]["correct"] = rows[0]["episode"]["correct"] = True
    failed = {**rows[1], "id": "failed-sample", "score": 0.0, "correct": False, "error": "RuntimeError: decode", "episode": None}
    rows.append(failed)  # an error row: no record, scores 0, counts in n
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarize(rows)
    write_report(summary, run)
    page, _ = build_page(run, thumbs=False)
    [shown] = json.loads(re.search(r'id="records">(.*?)</script>', page, re.S).group(1))  # the embedded runs
    index = shown["summary"]
    assert index["accuracy"] == pytest.approx(json.loads((run / "summary.json").read_text())["accuracy"])
    assert index["accuracy"] != pytest.approx(sum(r["correct"] for r in rows) / len(rows))  # the fixture tells them apart
    assert index["correct"] == sum(1 for r in rows if r["episode"] and r["episode"]["correct"])
    assert index["episodes"] == len(rows) - 1 and shown["without_record"] == 1


class _Index(HTMLParser):
    """The index table's cells (by row and class) and the timeline's asked / predicted marks, by episode."""

    def __init__(self):
        super().__init__()
        self.rows, self.marks, self.row, self.episode = {}, [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "tr" and "data-run" in a:
            self.row = self.rows.setdefault(int(a["data-run"]), {})
        elif tag == "td" and self.row is not None and "data-value" in a:
            self.row[classes[0]] = a["data-value"]
        elif "episode" in classes:
            self.episode = a["data-sample-id"]
        elif tag in ("rect", "text") and ({"asked", "asked-label", "predicted"} & set(classes)):
            self.marks.append((self.episode, tag, classes, a))

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.row = None


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium (apt-get install chromium; .ci/run does)")
def test_the_index_summarises_each_run_and_the_timeline_marks_the_asked_event_and_the_predicted_span(evaluated, tmp_path):
    """A training run's layout: its held-out evaluation (with summary.json) and two steps of sampled rollouts, one
    episode of which is a grounding answer; the index's figures are recomputed here from the records."""
    from paravt.evaluation.fingerprints import fingerprint_id

    run = tmp_path / "run"
    shutil.copytree(evaluated, run / "eval", ignore=shutil.ignore_patterns("*.lock", "view.html"))
    summary = json.loads((evaluated / "summary.json").read_text())
    summary["fingerprint"]["policy"] = "baseline:detector"  # as paravt eval --policy baseline:detector records it
    (run / "eval" / "summary.json").write_text(json.dumps(summary))
    rows = read_results(evaluated / "results.jsonl")
    (run / "rollouts").mkdir()
    for step, part in ((10, rows[:3]), (20, rows[3:])):
        eps = [{**r["episode"], "step": step} for r in part]
        if step == 10:
            eps[0].update(question_type="tvg", truth_span=[30.0, 40.0], predicted_span=[35.5, 47.0], correct=False)
        (run / "rollouts" / f"step_{step:06d}.jsonl").write_text(
            "".join(json.dumps({"id": f"{e['sample_id']}@{step}", "episode": e}) + "\n" for e in eps))
    path, counts = write_view(run, thumbs=False)
    proc = subprocess.run(["chromium", "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
                           "--enable-logging=stderr", "--v=0", "--dump-dom", path.as_uri()],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0 and not re.findall(r"CONSOLE.*", proc.stderr), proc.stderr
    page = _Index()
    page.feed(proc.stdout)
    sources = [("eval", [r["episode"] for r in rows], None),
               ("rollouts/step_000010", None, 10), ("rollouts/step_000020", None, 20)]  # fmt: skip
    assert len(page.rows) == 3
    for i, (name, _, step) in enumerate(sources):
        got = page.rows[i]
        eps = [json.loads(line)["episode"] for line in (run / f"{name}.jsonl").read_text().splitlines()] if step else \
            [r["episode"] for r in rows]
        crops = [sum(c["status"] == "executed" for t in e["turns"] for c in t["crops"]) for e in eps]
        correct = sum(e["correct"] for e in eps)
        assert int(got["episodes"]) == len(eps) and int(got["correct"]) == correct and int(got["wrong"]) == len(eps) - correct
        assert float(got["accuracy"]) == pytest.approx(sum(e["score"] for e in eps) / len(eps))  # the mean score
        assert float(got["crops"]) == pytest.approx(sum(crops) / len(crops))
        assert float(got["tool-use"]) == pytest.approx(sum(c > 0 for c in crops) / len(crops))
        assert got["k"] == ",".join(str(k) for k in sorted({e["frame_budget"] for e in eps}))
        assert got["step"] == ("" if step is None else str(step))
        if step is None:
            assert got["fingerprint"] == fingerprint_id(summary["fingerprint"]) and got["policy"] == summary["fingerprint"]["policy"]
        else:
            assert got["fingerprint"] == ""
    # every asked event outlined and labelled, in every run's cards; the grounding card's predicted span drawn
    asked = [(ep, a) for ep, tag, cls, a in page.marks if tag == "rect" and "asked" in cls]
    expected = [(r["episode"]["sample_id"], e) for r in rows for e in r["episode"]["events"] if e["asked"]]
    assert len(asked) == 2 * len(expected)  # the eval's cards and the rollouts' cards
    assert {(ep, float(a["data-start"]), float(a["data-end"])) for ep, a in asked} == \
        {(ep, e["start"], e["end"]) for ep, e in expected}
    assert sum(1 for _, tag, cls, _ in page.marks if "asked-label" in cls) == len(asked)
    spans = [(r["episode"]["sample_id"], tuple(r["episode"]["predicted_span"])) for r in rows if r["episode"]["predicted_span"]]
    drawn = [(ep, (float(a["data-start"]), float(a["data-end"]))) for ep, _, cls, a in page.marks if "predicted" in cls]
    for f in sorted((run / "rollouts").glob("*.jsonl")):
        eps = [json.loads(line)["episode"] for line in f.read_text().splitlines()]
        spans += [(e["sample_id"], tuple(e["predicted_span"])) for e in eps if e["predicted_span"]]
    assert (rows[0]["episode"]["sample_id"], (35.5, 47.0)) in spans and sorted(drawn) == sorted(spans)
    [predicted] = [a for ep, _, cls, a in page.marks if "predicted" in cls and float(a["data-end"]) == 47.0]
    x = lambda t, d: PAD + (W - 2 * PAD) * min(max(t, 0), d) / d  # noqa: E731
    duration = max([rows[0]["episode"]["duration"] or 0, *rows[0]["episode"]["overview"], *(e["end"] for e in rows[0]["episode"]["events"])])
    assert float(predicted["x"]) == pytest.approx(x(35.5, duration))
    assert float(predicted["width"]) == pytest.approx(max(x(47.0, duration) - x(35.5, duration), 1))
