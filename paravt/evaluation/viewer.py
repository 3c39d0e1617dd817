"""``paravt view DIR``: a static, self-contained HTML page of what the agent did, episode by episode.

For an evaluation directory (``results.jsonl`` whose rows carry ``episode`` records, ``paravt_env.records``) or
any directory holding such evaluations (a training run's ``RUN/eval*`` and its sampled rollouts
``RUN/rollouts/step_NNNNNN.jsonl``, one section per step; a repro's ``OUT/arms/*/seed*/eval_*``):
per episode, a timeline of the video with the overview frame ticks, each crop window (coloured by turn), the
true event windows or grounding span, the answer against the truth, thumbnails of the frames the agent saw and
the turn texts; the event the question asks about outlined and labelled; a grounding answer's predicted span
drawn against the true one. At the top, an index with one row per run (an evaluation, or a training step's
rollouts): episodes, accuracy, crops per episode, tool use, K, the policy and its fingerprint's id, and links to
its correct and wrong episodes; filters on run, correctness, tool use, question type and K. The page opens from
disk (no server): the records are embedded as JSON and drawn by a small script. Every episode element carries
``data-sample-id``, every drawn window ``data-start`` / ``data-end`` in seconds, every index cell its figure as
``data-value``, so the page can be checked against the records.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from paravt_env.records import finite
from paravt_env.storage import write_text_atomic

THUMB_HEIGHT = 48
"""Thumbnail height in pixels."""
MAX_THUMBS = 40
"""Thumbnails per episode at most (overview first, then crop frames in turn order)."""


def find_sources(root: Path) -> list[tuple[str, Path]]:
    """``(name, file)`` of every record file under ``root``: evaluations' ``results.jsonl`` (named by their
    directory) and a training run's ``rollouts/step_NNNNNN.jsonl`` (named by their step), sorted."""
    root = Path(root)
    files = sorted([*root.rglob("results.jsonl"), *root.rglob("rollouts/step_*.jsonl")])
    out = []
    for f in files:
        base = f.parent if f.name == "results.jsonl" else f.with_suffix("")
        name = str(base.relative_to(root)) if base != root else root.name
        out.append((name, f))
    return out


def load_episodes(path: Path) -> tuple[list[dict[str, Any]], int, list[float]]:
    """The episode records of a record file, how many of its rows had none (written before records existed, or
    failed before the episode began), and every row's score: an evaluation row's own (an error row's is 0, as
    ``summary.json`` counts it), a rollout row's record's."""
    from paravt.evaluation.store import read_results

    records, missing, scores = [], 0, []
    for row in read_results(path):
        ep = row.get("episode")
        if isinstance(ep, dict):
            records.append(ep)
        else:
            missing += 1
        score = row.get("score", ep.get("score") if isinstance(ep, dict) else None)
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            scores.append(float(score))
    return records, missing, scores


def thumbnails(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Small JPEGs of the frames the agent saw (``{"t", "source", "src"}``), decoded from the video again;
    none where the video cannot be read any more."""
    from PIL import Image

    from paravt_env.video import VideoDecodeError, open_video

    shown = [(t, "overview") for t in record.get("overview") or []]
    for i, turn in enumerate(record.get("turns") or []):
        shown += [(t, f"turn {i + 1}") for t in turn.get("frames") or []]
    shown = [(t, s) for t, s in shown if isinstance(t, (int, float))][:MAX_THUMBS]
    if not shown:
        return []
    try:
        reader = open_video(record["video"])
    except (OSError, VideoDecodeError, KeyError, ValueError):
        return []
    out = []
    try:
        frames = reader.frames_at([t for t, _ in shown], min_pixels=None, max_pixels=None)
        for (t, source), image in zip(shown, frames.images, strict=True):
            img = Image.fromarray(image)
            img.thumbnail((THUMB_HEIGHT * 4, THUMB_HEIGHT))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=70)
            out.append({"t": t, "source": source, "src": "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()})
    except (OSError, VideoDecodeError, ValueError):
        return []
    finally:
        reader.close()
    return out


def _executed_crops(record: dict[str, Any]) -> int | None:
    """Crops the env ran in an episode, or None for a record whose turns are not what the schema says."""
    try:
        return sum(1 for t in record.get("turns") or [] for c in t.get("crops") or [] if c.get("status") == "executed")
    except (AttributeError, TypeError):
        return None


def run_summary(path: Path, records: list[dict[str, Any]], scores: list[float] | None = None) -> dict[str, Any]:
    """A run's index row: its episodes, accuracy, crops per episode, tool use and K values, from the records;
    the RL step of a rollout file; for an evaluation, the policy and the id of the fingerprint its
    ``summary.json`` holds (``fingerprints.fingerprint_id``), None where there is none.

    ``accuracy`` is ``paravt eval``'s and ``summary.json``'s: the mean score over every row (``scores``; the
    records' scores when not given), which gives partial credit (token F1 of an open answer, IoU of a grounding
    span) and counts an error row as 0. ``correct`` / ``wrong`` count the episodes whose score passes the
    scorer's threshold (``scoring.is_correct``: the right letter, F1 or IoU of at least 0.5)."""
    from paravt.evaluation.fingerprints import fingerprint_id

    crops = [c for c in (_executed_crops(r) for r in records) if c is not None]
    correct = sum(1 for r in records if r.get("correct") is True)
    if scores is None:
        scores = [float(r["score"]) for r in records if isinstance(r.get("score"), (int, float))]
    ks = sorted({r["frame_budget"] for r in records if isinstance(r.get("frame_budget"), int)})
    out: dict[str, Any] = {
        "kind": "eval" if path.name == "results.jsonl" else "rollouts",
        "step": None, "episodes": len(records), "correct": correct, "wrong": len(records) - correct,
        "accuracy": sum(scores) / len(scores) if scores else None,
        "crops_per_episode": sum(crops) / len(crops) if crops else None,
        "tool_use": sum(c > 0 for c in crops) / len(crops) if crops else None,
        "k": ks, "policy": None, "fingerprint": None,
    }  # fmt: skip
    if out["kind"] == "rollouts":
        steps = {r["step"] for r in records if isinstance(r.get("step"), int)}
        digits = path.stem.removeprefix("step_")
        out["step"] = steps.pop() if len(steps) == 1 else (int(digits) if digits.isdigit() else None)
        out["policy"] = "training rollouts (sampled)"
        return out
    for name in ("summary.json", "eval_config.json"):
        try:
            doc = json.loads((path.parent / name).read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if not isinstance(doc, dict):
            continue
        fp = doc.get("fingerprint") if name == "summary.json" else None
        if isinstance(fp, dict):
            out["fingerprint"] = fingerprint_id(fp)
            out["policy"] = out["policy"] or fp.get("policy")
        out["policy"] = out["policy"] or doc.get("policy")
    if out["policy"] is not None and not isinstance(out["policy"], str):
        out["policy"] = json.dumps(out["policy"], sort_keys=True)
    return out


def script_json(value: Any) -> str:
    """``value`` as JSON that nothing can carry out of a ``<script>`` element: every ``<``, ``>`` and ``&`` is a
    JSON escape (``</script>``, ``<!--`` and ``<script`` all put the HTML parser in another state, so escaping
    ``</`` alone is not enough), and so are U+2028 / U+2029. ``JSON.parse`` reads it back unchanged."""
    text = json.dumps(value, allow_nan=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def build_page(root: Path, *, thumbs: bool = True) -> tuple[str, dict[str, int]]:
    """The HTML page for ``root`` and counts (runs, episodes, rows without a record)."""
    runs = []
    counts = {"runs": 0, "episodes": 0, "without_record": 0}
    for name, path in find_sources(root):
        records, missing, scores = load_episodes(path)
        for r in records:
            r["thumbnails"] = thumbnails(r) if thumbs else []
        runs.append({"name": name, "summary": run_summary(path, records, scores), "episodes": records,
                     "without_record": missing})  # fmt: skip
        counts["runs"] += 1
        counts["episodes"] += len(records)
        counts["without_record"] += missing
    data = script_json(finite(runs))
    title = html.escape(f"paravt view: {Path(root).resolve().name}")
    return PAGE.replace("__TITLE__", title).replace("__DATA__", data), counts


def write_view(root: str | Path, out: str | Path | None = None, *, thumbs: bool = True) -> tuple[Path, dict[str, int]]:
    """Write the page (default ``ROOT/view.html``); returns its path and the counts."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no such directory: {str(root)!r}")
    page, counts = build_page(root, thumbs=thumbs)
    if counts["runs"] == 0:
        raise FileNotFoundError(f"{root} holds no evaluation or rollout records (no results.jsonl or rollouts/ under it)")
    path = Path(out) if out is not None else root / "view.html"
    write_text_atomic(path, page)
    return path, counts


PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
.filters label { margin-right: 1em; }
.run > h2 { border-bottom: 1px solid #ccc; }
.episode { border: 1px solid #ddd; border-radius: 6px; padding: .6em .8em; margin: .8em 0; }
.episode.correct { border-left: 6px solid #2a9d55; } .episode.wrong { border-left: 6px solid #d33; }
.head { display: flex; gap: 1.2em; flex-wrap: wrap; } .head b { font-weight: 600; }
svg.timeline { width: 100%; height: auto; background: #fafafa; margin: .4em 0; }
.thumbs img { height: 48px; margin: 1px; border: 2px solid #ccc; } .thumbs img.crop { border-color: #36c; }
pre { white-space: pre-wrap; background: #f4f4f4; padding: .4em; margin: .2em 0; max-height: 14em; overflow: auto; }
.legend span { margin-right: 1em; } .sw { display: inline-block; width: 12px; height: 10px; margin-right: 3px; }
table.index { border-collapse: collapse; margin: .6em 0 1em; } table.index td, table.index th { border: 1px solid #ddd; padding: .2em .6em; text-align: right; }
table.index td.name, table.index td.policy { text-align: left; } table.index td.policy { max-width: 28em; overflow-wrap: anywhere; }
.head .asked { color: #1e6b3a; } .head .predicted-text { color: #d35400; }
</style></head>
<body>
<h1>__TITLE__</h1>
<table class="index" id="index"><thead><tr><th>run</th><th>step</th><th>episodes</th>
 <th title="the mean score, as paravt eval and summary.json give it: partial credit (token F1 of an open answer, IoU of a span), an error row 0">accuracy</th><th>crops / episode</th>
 <th>tool use</th><th>K</th><th title="episodes whose score passes the scorer's threshold: the right letter, or F1 / IoU of at least 0.5">correct</th><th>wrong</th><th>policy</th><th>fingerprint</th></tr></thead><tbody></tbody></table>
<p class="note">accuracy: the mean score (partial credit for an open answer or a span), as <code>paravt eval</code> and <code>summary.json</code> give it; correct / wrong: episodes whose score reaches the scorer's threshold.</p>
<div class="filters">
 <label>run <select id="f-run"><option value="">all</option></select></label>
 <label>result <select id="f-result"><option value="">all</option><option value="correct">correct</option><option value="wrong">wrong</option></select></label>
 <label>tools <select id="f-tools"><option value="">all</option><option value="yes">used tools</option><option value="no">no tool</option></select></label>
 <label>question type <select id="f-qtype"><option value="">all</option></select></label>
 <label>K <select id="f-k"><option value="">all</option></select></label>
 <span id="shown"></span>
</div>
<div class="legend"><span><i class="sw" style="background:#888"></i>overview frame</span>
 <span><i class="sw" style="background:#2a9d55;opacity:.5"></i>true event / span</span>
 <span><i class="sw" style="background:#2a9d55;outline:2px solid #1e6b3a"></i>the event asked about</span>
 <span><i class="sw" style="border:2px dashed #d35400;height:6px"></i>predicted span</span>
 <span><i class="sw" style="background:#36c"></i>crop window (colour = turn; faint = not run)</span></div>
<div id="runs"></div>
<script type="application/json" id="records">__DATA__</script>
<script>
"use strict";
const RUNS = JSON.parse(document.getElementById("records").textContent);
const W = 1000, PAD = 10, TURN_COLOURS = ["#36c", "#e67e22", "#8e44ad", "#16a085", "#c0392b", "#7f8c8d"];
const SVG = "http://www.w3.org/2000/svg";
function el(tag, attrs, text) {
  const e = tag === "svg" || ["rect", "line", "text", "g", "title", "pattern", "path", "defs"].includes(tag)
    ? document.createElementNS(SVG, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function span(record) {
  let end = record.duration || 0;
  for (const t of record.overview || []) end = Math.max(end, t);
  for (const e of record.events || []) end = Math.max(end, e.end);
  return end > 0 ? end : 1;
}
function timeline(record) {
  const dur = span(record), x = t => PAD + (W - 2 * PAD) * Math.min(Math.max(t, 0), dur) / dur;
  const svg = el("svg", {class: "timeline", viewBox: `0 0 ${W} 124`, "data-duration": dur});
  svg.append(el("line", {x1: x(0), x2: x(dur), y1: 60, y2: 60, stroke: "#bbb"}));
  for (const e of record.events || []) {
    // the event the question asks about stands out (outlined, labelled); the others are context
    const asked = e.asked === true, other = e.asked === false;
    const r = el("rect", {class: asked ? "event asked" : "event", "data-start": e.start, "data-end": e.end,
      "data-asked": asked ? "yes" : other ? "no" : "unknown", x: x(e.start), y: 8,
      width: Math.max(x(e.end) - x(e.start), 1), height: 94, fill: "#2a9d55", opacity: asked ? 0.45 : other ? 0.15 : 0.25});
    if (asked) { r.setAttribute("stroke", "#1e6b3a"); r.setAttribute("stroke-width", 2); }
    r.append(el("title", {}, `${asked ? "asked: " : ""}${e.label}: ${e.start}-${e.end} s`)); svg.append(r);
    if (asked) svg.append(el("text", {class: "asked-label", x: x(e.start) > 0.75 * W ? x(e.end) : x(e.start), y: 117,
      "font-size": 11, fill: "#1e6b3a", "text-anchor": x(e.start) > 0.75 * W ? "end" : "start"}, `asked: ${e.label}`));
  }
  if (record.predicted_span) {
    const [s, e] = record.predicted_span, lo = Math.min(s, e), hi = Math.max(s, e);
    const r = el("rect", {class: "predicted", "data-start": s, "data-end": e, x: x(lo), y: 4, width: Math.max(x(hi) - x(lo), 1),
      height: 102, fill: "none", stroke: "#d35400", "stroke-width": 2, "stroke-dasharray": "6 3"});
    r.append(el("title", {}, `predicted span: ${s}-${e} s`)); svg.append(r);
  }
  if (record.truth_span) {
    const [s, e] = record.truth_span;
    svg.append(el("rect", {class: "truth", "data-start": s, "data-end": e, x: x(s), y: 8, width: Math.max(x(e) - x(s), 1),
      height: 94, fill: "none", stroke: "#2a9d55", "stroke-width": 2}));
  }
  for (const t of record.overview || []) {
    svg.append(el("line", {class: "overview-tick", "data-t": t, x1: x(t), x2: x(t), y1: 48, y2: 72, stroke: "#888", "stroke-width": 2}));
  }
  (record.turns || []).forEach((turn, i) => {
    for (const c of turn.crops || []) {
      if (c.start === null || c.end === null) continue;
      const lo = Math.min(c.start, c.end), hi = Math.max(c.start, c.end), colour = TURN_COLOURS[i % TURN_COLOURS.length];
      const r = el("rect", {class: "crop " + c.status, "data-start": c.start, "data-end": c.end, "data-turn": i + 1,
        "data-status": c.status, x: x(lo), y: 14 + 8 * (i % 4), width: Math.max(x(hi) - x(lo), 1), height: 7,
        fill: colour, stroke: "#fff", "stroke-width": 1, opacity: c.status === "executed" ? 0.9 : 0.35});
      r.append(el("title", {}, `turn ${i + 1}, call ${c.call + 1}: ${c.start}-${c.end} s, ${c.status}` +
        (c.error ? ` (${c.error})` : `, ${c.frames} frames`)));
      svg.append(r);
    }
  });
  for (let t = 0; t <= dur; t += Math.max(1, Math.ceil(dur / 10))) {
    svg.append(el("text", {x: x(t), y: 92, "font-size": 11, "text-anchor": "middle", fill: "#666"}, `${t}s`));
  }
  return svg;
}
function episode(record, run) {
  const used = (record.turns || []).some(t => (t.crops || []).some(c => c.status === "executed"));
  const d = el("div", {class: "episode " + (record.correct ? "correct" : "wrong"), "data-sample-id": record.sample_id,
    "data-correct": record.correct ? "yes" : "no", "data-tools": used ? "yes" : "no",
    "data-qtype": record.question_type, "data-k": record.frame_budget, "data-run": run});
  const head = el("div", {class: "head"});
  if (record.step !== undefined) { d.setAttribute("data-step", record.step); head.append(el("span", {}, `step ${record.step}`)); }
  head.append(el("b", {}, record.sample_id), el("span", {}, `K = ${record.frame_budget}`),
    el("span", {class: "prediction"}, `answer: ${record.prediction || "(none)"}`),
    el("span", {class: "truth-text"}, `truth: ${record.answer}`),
    el("span", {}, `score ${Number(record.score).toFixed(2)}, reward ${Number((record.reward || {}).total || 0).toFixed(2)}`));
  const asked = (record.events || []).filter(e => e.asked === true);
  if (asked.length) head.append(el("span", {class: "asked"}, `asked about: ${asked.map(e => `${e.label} (${e.start}-${e.end} s)`).join(", ")}`));
  if (record.predicted_span) head.append(el("span", {class: "predicted-text"}, `predicted span ${record.predicted_span.join("-")} s` +
    (record.truth_span ? `, true ${record.truth_span.join("-")} s` : "")));
  else if (record.truth_span) head.append(el("span", {class: "predicted-text"}, "no span in the answer"));
  d.append(head, el("div", {class: "question"}, record.question), timeline(record));
  const thumbs = el("div", {class: "thumbs"});
  for (const th of record.thumbnails || []) {
    thumbs.append(el("img", {src: th.src, class: th.source === "overview" ? "overview" : "crop", "data-t": th.t,
      title: `${th.source}, ${th.t} s`, alt: `${th.t} s`}));
  }
  d.append(thumbs);
  (record.turns || []).forEach((turn, i) => {
    const det = el("details", {class: "turn"});
    det.append(el("summary", {}, `turn ${i + 1}: ${(turn.crops || []).length} call(s)` +
      ((turn.parse_problems || []).length ? `, problems: ${turn.parse_problems.join("; ")}` : "")));
    det.append(el("pre", {}, turn.text));
    d.append(det);
  });
  return d;
}
function errorCard(record, err, run) {
  // a record this page cannot draw (a wrongly typed field): said on its own card, the others still draw
  const d = el("div", {class: "episode error", "data-sample-id": String((record || {}).sample_id), "data-correct": "no",
    "data-tools": "no", "data-qtype": "", "data-k": "", "data-run": run});
  d.append(el("div", {class: "head"}, `episode ${String((record || {}).sample_id)}: this record could not be drawn (${err})`));
  return d;
}
function fmt(v, digits) { return v === null || v === undefined ? "-" : Number(v).toFixed(digits); }
function showOnly(run, result) {
  // an index link: this run's episodes with this outcome, then scroll to them
  document.getElementById("f-run").value = String(run); document.getElementById("f-result").value = result;
  applyFilters(); document.getElementById(`run-${run}`).scrollIntoView();
}
function indexRow(run, i) {
  const s = run.summary || {}, tr = el("tr", {"data-run": i});
  const cell = (cls, value, text) => { const td = el("td", {class: cls, "data-value": value === null || value === undefined ? "" : value}, text); tr.append(td); return td; };
  const name = el("td", {class: "name"}); name.append(el("a", {href: `#run-${i}`}, run.name)); tr.append(name);
  cell("step", s.step, s.step === null || s.step === undefined ? "" : String(s.step));
  cell("episodes", s.episodes, String(s.episodes));
  cell("accuracy", s.accuracy, fmt(s.accuracy, 3));
  cell("crops", s.crops_per_episode, fmt(s.crops_per_episode, 2));
  cell("tool-use", s.tool_use, fmt(s.tool_use, 2));
  cell("k", (s.k || []).join(","), (s.k || []).join(", "));
  for (const outcome of ["correct", "wrong"]) {
    const td = cell(outcome, s[outcome], ""), a = el("a", {href: `#run-${i}`, class: "show-" + outcome}, String(s[outcome]));
    a.addEventListener("click", ev => { ev.preventDefault(); showOnly(i, outcome); }); td.append(a);
  }
  cell("policy", s.policy, s.policy || "");
  cell("fingerprint", s.fingerprint, s.fingerprint || "");
  return tr;
}
function render() {
  const root = document.getElementById("runs"), qtypes = new Set(), ks = new Set();
  const index = document.querySelector("#index tbody"), runSelect = document.getElementById("f-run");
  RUNS.forEach((run, i) => {
    index.append(indexRow(run, i));
    runSelect.append(el("option", {value: i}, run.summary && run.summary.step !== null && run.summary.step !== undefined ? `step ${run.summary.step}` : run.name));
    const section = el("section", {class: "run", id: `run-${i}`, "data-run": run.name});
    section.append(el("h2", {}, `${run.name} (${run.episodes.length} episodes` +
      (run.without_record ? `, ${run.without_record} rows without a record` : "") + ")"));
    for (const r of run.episodes) {
      let card;
      try { card = episode(r, i); qtypes.add(r.question_type); ks.add(r.frame_budget); } catch (err) { card = errorCard(r, err, i); }
      section.append(card);
    }
    root.append(section);
  });
  for (const q of [...qtypes].sort()) document.getElementById("f-qtype").append(el("option", {value: q}, q));
  for (const k of [...ks].sort((a, b) => a - b)) document.getElementById("f-k").append(el("option", {value: k}, k));
}
function applyFilters() {
  const want = {run: document.getElementById("f-run").value, correct: document.getElementById("f-result").value, tools: document.getElementById("f-tools").value,
    qtype: document.getElementById("f-qtype").value, k: document.getElementById("f-k").value};
  let shown = 0;
  for (const e of document.querySelectorAll(".episode")) {
    const ok = (!want.run || e.dataset.run === want.run) && (!want.correct || e.dataset.correct === (want.correct === "correct" ? "yes" : "no")) &&
      (!want.tools || e.dataset.tools === want.tools) && (!want.qtype || e.dataset.qtype === want.qtype) &&
      (!want.k || e.dataset.k === want.k);
    e.style.display = ok ? "" : "none"; shown += ok;
  }
  document.getElementById("shown").textContent = `${shown} shown`;
}
render();
for (const id of ["f-run", "f-result", "f-tools", "f-qtype", "f-k"]) document.getElementById(id).addEventListener("change", applyFilters);
applyFilters();
</script></body></html>
"""
