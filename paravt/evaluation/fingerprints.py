"""Run fingerprints and ``paravt eval diff``: what determines an evaluation's numbers, and why two differ.

``summary.json["fingerprint"]`` records the protocol, prompt mode and a hash of the system prompts shown, a
hash of every sample's overview timestamps, a hash of every sample's inputs (its row and its video's content
identity: ``input_identity``), the pixel budget and crop settings, the decoder backend and its library
versions, the scorer, the policy and its sampling settings, and the project's version. Two runs whose
fingerprints agree saw the same inputs and were scored the same way.

``diff_runs(A, B)`` lists the fingerprint fields that differ, then per-sample agreement (both right, only A,
only B, both wrong) with the causes it can name per sample (other inputs, another K, other overview frames,
another system prompt, another number of crops), naming the samples whose inputs differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from paravt_env.config import flatten_dotted
from paravt_env.episodes import episode_class, resolve_protocol

SCORER = "paravt-score/1"
"""Version of ``score_prediction`` / ``is_correct`` (bump when scoring changes); the release protocol's rows
are scored by ``release_score`` and say so."""


def _sha(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


EDGE_BYTES = 1 << 20
"""A video's content identity hashes its size and its first and last MiB: a replaced or re-encoded video
differs there, and hashing whole long videos would cost more than evaluating them."""

_VIDEO_IDS: dict[tuple[str, int, int], str] = {}
_VIDEO_IDS_LOCK = threading.Lock()


def video_identity(path: str | os.PathLike) -> str | None:
    """The content identity of a video file (None: it cannot be read), cached per (path, size, mtime)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (os.fspath(path), st.st_size, st.st_mtime_ns)
    with _VIDEO_IDS_LOCK:
        if key in _VIDEO_IDS:
            return _VIDEO_IDS[key]
    digest = hashlib.sha256(str(st.st_size).encode())
    try:
        with open(path, "rb") as f:
            digest.update(f.read(EDGE_BYTES))
            if st.st_size > EDGE_BYTES:
                f.seek(max(EDGE_BYTES, st.st_size - EDGE_BYTES))
                digest.update(f.read(EDGE_BYTES))
    except OSError:
        return None
    value = digest.hexdigest()[:16]
    with _VIDEO_IDS_LOCK:
        _VIDEO_IDS[key] = value
    return value


def input_identity(sample: Any) -> dict[str, Any]:
    """What the policy is shown for ``sample``: a hash of its row (question, options, answer, paths, extras)
    and its video's content identity (``video_identity``; None when the video cannot be read)."""
    return {"sample_sha": _sha(sample.to_dict()), "video_sha": video_identity(sample.video_path)}


def _scorer(config: dict[str, Any]) -> str:
    """How the evaluation scored its answers: the release's scorer under a release protocol, else ours."""
    try:
        release = episode_class(resolve_protocol(str(config.get("protocol", "paravt")), str(config.get("tool_result", "frames")))).release
    except ValueError:  # a protocol this version does not know: scored as ours
        return SCORER
    return "release_score" if release else SCORER


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in ("paravt-gym", "av", "decord", "numpy", "transformers", "torch"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def policy_settings(agent: Any) -> dict[str, Any]:
    """What an agent's policy samples with, where it says (model agents); {} for scripted agents."""
    policy = getattr(agent, "policy", None)
    if policy is None:
        return {"agent": type(agent).__name__}
    keys = ("temperature", "top_p", "max_new_tokens", "think_prefix", "min_pixels", "max_pixels", "base_url", "model")
    out = {k: getattr(policy, k) for k in keys if isinstance(getattr(policy, k, None), (int, float, str, bool))}
    name = getattr(getattr(getattr(policy, "model", None), "config", None), "_name_or_path", None)
    if name:
        out["model_path"] = str(name)
    out["policy"] = type(policy).__name__
    return out


def fingerprint(config: dict[str, Any], rows: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint of an evaluation: ``config`` (its ``eval_config.json``), its result ``rows``, the
    policy's sampling ``settings`` (``policy_settings``)."""
    episodes = {r["id"]: r["episode"] for r in rows if isinstance(r.get("episode"), dict)}
    prompts = sorted({ep.get("system_prompt_sha") for ep in episodes.values() if ep.get("system_prompt_sha")})
    return {
        "protocol": config.get("protocol", "paravt"),
        "prompt_mode": config.get("prompt_mode"),
        "system_prompt_sha": prompts,
        "frames_sha": _sha(sorted((i, ep.get("overview")) for i, ep in episodes.items())),
        "inputs_sha": _sha(sorted((r["id"], r.get("inputs")) for r in rows)),
        "frame_budget": config.get("frame_budget"),
        "pixels": [config.get("min_pixels"), config.get("max_pixels")],
        "crops": {k: config.get(k) for k in ("dispatch", "max_turns", "max_parallel", "crop_fps", "crop_max_frames", "tool_result")},
        "decoder": {"backend": config.get("backend", "auto")},
        "scorer": _scorer(config),
        "judge": config.get("judge"),
        "policy": config.get("policy"),
        "sampling": settings,
        "data": config.get("data"),
        "versions": _versions(),
        "samples_with_records": len(episodes),
    }  # fmt: skip


def fingerprint_id(fp: dict[str, Any]) -> str:
    """A short hash of a whole fingerprint: two evaluations with the same id agree on every field."""
    return _sha(fp)


def _load(run: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A finished eval directory's fingerprint and rows; a summary that is not what ``paravt eval`` writes is a
    ``ValueError`` naming the file."""
    from paravt.evaluation.store import read_results

    summary_path = Path(run) / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{run} holds no summary.json: is it a finished paravt eval directory?")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{summary_path} is not valid JSON ({exc}): rerun paravt eval on {run} to rewrite it") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{summary_path} must hold a JSON object, got a {type(summary).__name__}")
    fp = summary.get("fingerprint")
    if fp is not None and not isinstance(fp, dict):
        raise ValueError(f"{summary_path}: its fingerprint must be a JSON object, got a {type(fp).__name__}")
    rows = {r["id"]: r for r in read_results(Path(run) / "results.jsonl") if isinstance(r, dict) and "id" in r}
    return fp or {}, rows


def diff_runs(a: str | Path, b: str | Path) -> str:
    """Markdown: the fingerprint fields that differ, then per-sample agreement and its nameable causes."""
    fa, rows_a = _load(Path(a))
    fb, rows_b = _load(Path(b))
    lines = [f"# paravt eval diff\n\nA = `{a}`\nB = `{b}`\n"]
    flat_a, flat_b = flatten_dotted(fa), flatten_dotted(fb)
    changed = sorted(k for k in flat_a.keys() | flat_b.keys() if flat_a.get(k) != flat_b.get(k))
    if not fa or not fb:
        lines.append("One run has no fingerprint (written before fingerprints existed): only the samples are compared.\n")
    if changed:
        lines += ["## Settings that differ", "", "| field | A | B |", "|---|---|---|"]
        lines += [f"| {k} | {flat_a.get(k)!r} | {flat_b.get(k)!r} |" for k in changed]
        lines.append("")
    else:
        lines.append("The fingerprints agree.\n")
    common = sorted(rows_a.keys() & rows_b.keys())
    agree = Counter()
    causes: Counter = Counter()
    other_inputs = []
    for i in common:
        ra, rb = rows_a[i], rows_b[i]
        ia, ib = ra.get("inputs"), rb.get("inputs")
        if isinstance(ia, dict) and isinstance(ib, dict) and ia != ib:
            what = [k.removesuffix("_sha") for k in sorted(ia.keys() | ib.keys()) if ia.get(k) != ib.get(k)]
            other_inputs.append(f"{i} ({', '.join(what)})")
        agree[(bool(ra.get("correct")), bool(rb.get("correct")))] += 1
        ea, eb = ra.get("episode") or {}, rb.get("episode") or {}
        if ra.get("frame_budget") != rb.get("frame_budget"):
            causes[f"A saw {ra.get('frame_budget')} overview frames, B {rb.get('frame_budget')}"] += 1
        elif ea and eb and ea.get("overview") != eb.get("overview"):
            causes["the same K but other overview frames (timestamps differ)"] += 1
        if ea and eb and ea.get("system_prompt_sha") != eb.get("system_prompt_sha"):
            causes["another system prompt"] += 1
        if ra.get("tool_calls") != rb.get("tool_calls"):
            causes["another number of crops"] += 1
        if ra.get("prediction") != rb.get("prediction"):
            causes["another answer"] += 1
    lines += [f"## Samples ({len(common)} in both; {len(rows_a) - len(common)} only in A, {len(rows_b) - len(common)} only in B)",
              "", "| | B right | B wrong |", "|---|---|---|",
              f"| **A right** | {agree[(True, True)]} | {agree[(True, False)]} (only A) |",
              f"| **A wrong** | {agree[(False, True)]} (only B) | {agree[(False, False)]} |", ""]  # fmt: skip
    if other_inputs:
        causes["other inputs (the sample's row or its video changed)"] = len(other_inputs)
    if causes:
        lines += ["## Differences per sample", ""]
        lines += [f"- {cause} on {n} sample{'s' if n != 1 else ''}" for cause, n in causes.most_common()]
        lines.append("")
    if other_inputs:
        shown = other_inputs[:20]
        more = f" and {len(other_inputs) - len(shown)} more" if len(other_inputs) > len(shown) else ""
        lines += ["## Samples whose inputs differ", "", ", ".join(shown) + more, ""]
    return "\n".join(lines)


def checkpoint_identity(model_dir: str | Path, hash_below: int = 1 << 30) -> str:
    """What a checkpoint directory holds, as a short digest: the contents of every file that shapes what the model
    sees or computes (weights, configs, tokenizer, chat template, the policy card: every file but hidden ones and
    Markdown), or their sizes and modification times when the files pass ``hash_below`` bytes, where hashing would
    take minutes. Two saves of the same path with other weights, or an edited template, get other identities, so an
    evaluation keyed on it is redone."""
    import hashlib

    files = sorted(p for p in Path(model_dir).iterdir()
                   if p.is_file() and not p.name.startswith(".") and p.suffix.lower() != ".md")  # fmt: skip
    total = sum(p.stat().st_size for p in files)
    digest = hashlib.sha256()
    for p in files:
        st = p.stat()
        digest.update(f"{p.name}:{st.st_size}".encode())
        if total <= hash_below:
            digest.update(p.read_bytes())
        else:
            digest.update(str(st.st_mtime_ns).encode())
    return digest.hexdigest()[:16]
