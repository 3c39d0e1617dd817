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
from paravt.evaluation.viewer import PAGE, write_view
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
    from paravt.evaluation.policies import make_agent_factory

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
