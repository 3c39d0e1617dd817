"""Cold start from the released SFT data: conversations in lmms-engine's chat schema, as token-space episodes.

The release cold-starts ParaVT-8B with lmms-engine on parquet shards (``ParaVT/ParaVT-Parquet``, config
``sft``) whose rows hold ``messages``: a list (or its JSON text) of ``{"role", "content"}``, the content a
list of parts ``{"type": "text", "text"}``, ``{"type": "image_url", "image_url": {"url": path}}`` or
``{"type": "video_url", "video_url": {"url": path}}`` (a plain string is read as one text part). Assistant
turns carry the tool calls as text (``<tool_call>{...}</tool_call>``); tool results are user turns with
``<tool_response>`` text and the crop's images. Paths are relative to the file's folder (lmms-engine's
``data_folder``) unless absolute.

Each row becomes one ``Trajectory`` tokenised with the policy's chat template: loss on the assistant turns
only, as lmms-engine's labels. Images are read as they are; a video is sampled as the release's SFT recipe
samples it (qwen-vl-utils, 1 fps, at most 64 frames, 784-50176 pixels) and, since our policies take frames
as images, written as time-tagged frames (``<t seconds>`` then the frame, t = index / fps), the form the
release's RL workflow shows its overview in. Rows whose media is missing or unreadable are skipped and
counted; a row that is not in the schema is an error naming the file, the row and the field.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paravt.learners.trajectory import Trajectory, TrajectoryBuilder
from paravt.policies.base import Generation
from paravt.policies.hf import HFPolicy
from paravt_env.data.formats import DataFormatError
from paravt_env.data.loaders import read_rows
from paravt_env.messages import Message
from paravt_env.protocol.markers import IMAGE_PLACEHOLDER
from paravt_env.video import VideoDecodeError, open_video
from paravt_env.video.qwen_frames import QwenSamplingError, qwen_frames

SFT_VIDEO = {"fps": 1.0, "min_frames": 1, "max_frames": 64, "min_pixels": 784, "max_pixels": 50176}
"""``paravt/sft/configs/qwen3vl_8b.yaml``: ``video_sampling_strategy: fps``, ``fps: 1``, ``video_max_frames:
64``, ``video_min/max_pixels: 784 / 50176``."""
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class SFTConversation:
    """One row: its messages with the frames at their placeholders, and where it came from."""

    messages: list[Message]
    where: str


def release_sft_files(spec: str | Path) -> list[Path]:
    """A file, a directory (its ``.parquet``/``.json``/``.jsonl`` files) or a glob."""
    path = Path(spec).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in (".parquet", ".json", ".jsonl"))
    else:
        files = sorted(Path(p) for p in __import__("glob").glob(str(path)))
    if not files:
        raise FileNotFoundError(f"no SFT data file at {spec} (a .parquet / .json / .jsonl file, a folder or a glob)")
    return files


def _image(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


def _url(part: dict, kind: str, where: str) -> str:
    value = part.get(kind)
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str) or not url:
        raise DataFormatError(f"{where}: a {kind} part needs {{'{kind}': {{'url': PATH}}}}, got {part!r:.120}")
    return url.removeprefix("file://")


def _resolve(url: str, folder: Path | Sequence[Path]) -> Path:
    """An absolute path as is; a relative one under the first of the roots ``folder`` where it exists (else
    under the first root, so the error names where it was expected)."""
    p = Path(url).expanduser()
    if p.is_absolute():
        return p
    roots = [folder] if isinstance(folder, Path) else list(folder)
    return next((r / p for r in roots if (r / p).exists()), roots[0] / p)


def parse_row(row: Any, where: str, folder: Path | Sequence[Path]) -> SFTConversation:
    """One row as messages; media paths resolve under ``folder`` (a path or several, first match wins) and are
    read here (``FileNotFoundError`` / ``VideoDecodeError`` when missing)."""
    if not isinstance(row, dict) or "messages" not in row:
        keys = sorted(row) if isinstance(row, dict) else type(row).__name__
        raise DataFormatError(f"{where}: an SFT row needs field 'messages' (got {keys})")
    messages = row["messages"]
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{where}: field 'messages' is not valid JSON: {exc.msg}") from None
    if not isinstance(messages, list) or not messages:
        raise DataFormatError(f"{where}: field 'messages' must be a non-empty list of {{role, content}}")
    out = []
    for j, m in enumerate(messages):
        at = f"{where}, message {j}"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise DataFormatError(f"{at}: needs a role in {ROLES}, got {m!r:.80}")
        content = m.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list):
            raise DataFormatError(f"{at}: 'content' must be a string or a list of parts, got {type(content).__name__}")
        text, frames = [], []
        for part in parts:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                value = part.get("text", "")
                if not isinstance(value, str):  # never trained as its str() ("None", "5")
                    raise DataFormatError(f"{at}: a text part's 'text' must be a string, got {type(value).__name__} {value!r:.40}")
                text.append(value)
            elif kind == "image_url":
                frames.append(_image(_resolve(_url(part, "image_url", at), folder)))
                text.append(IMAGE_PLACEHOLDER)
            elif kind == "video_url":
                with open_video(_resolve(_url(part, "video_url", at), folder)) as reader:
                    clip = qwen_frames(reader, fps=SFT_VIDEO["fps"], min_frames=SFT_VIDEO["min_frames"],
                                       max_frames=SFT_VIDEO["max_frames"], min_pixels=SFT_VIDEO["min_pixels"],
                                       max_pixels=SFT_VIDEO["max_pixels"])  # fmt: skip
                    text += [f"<{i / reader.fps:.1f} seconds>{IMAGE_PLACEHOLDER}" for i in clip.indices]
                frames += list(clip.images)
            else:
                raise DataFormatError(f"{at}: unknown content part type {kind!r} (text, image_url, video_url)")
        role = "user" if m["role"] == "tool" else m["role"]  # a tool turn reaches the model as a user turn
        out.append(Message(role, "".join(text), frames))
    if not any(m.role == "assistant" for m in out):
        raise DataFormatError(f"{where}: no assistant turn to learn from")
    return SFTConversation(out, where)


def read_release_sft(spec: str | Path, limit: int | None = None,
                     video_root: str | Path | None = None) -> tuple[list[SFTConversation], list[str]]:  # fmt: skip
    """Every readable row of the files ``spec`` names, and one line per skipped row (missing media). Relative
    media paths resolve under ``video_root`` first (``sft.video_root``), then beside their data file."""
    conversations, skipped = [], []
    for path in release_sft_files(spec):
        for where, row in read_rows(path):
            if limit is not None and len(conversations) >= limit:
                return conversations, skipped
            label = f"{path}: {where}"
            try:
                roots = [Path(video_root).expanduser(), path.parent] if video_root else [path.parent]
                conversations.append(parse_row(row, label, roots))
            except (FileNotFoundError, VideoDecodeError, QwenSamplingError, OSError) as exc:
                skipped.append(f"{label}: {exc}")
    if skipped:
        warnings.warn(f"skipped {len(skipped)} SFT rows whose media could not be read (first: {skipped[0]})",
                      stacklevel=2)  # fmt: skip
    if not conversations:
        raise DataFormatError(f"no usable SFT row in {spec}" + (f" ({len(skipped)} skipped)" if skipped else ""))
    return conversations, skipped


def conversation_trajectory(policy: HFPolicy, conversation: SFTConversation) -> Trajectory:
    """Token-space episode of one conversation: loss on assistant turns only (each closed by the template's end
    token), everything else prompt. Consecutive non-assistant messages are one continuation."""
    msgs = conversation.messages
    first = next(i for i, m in enumerate(msgs) if m.role == "assistant")
    history = list(msgs[:first])
    builder = TrajectoryBuilder(policy, policy.encode(history), history)
    eos = policy.end_of_turn_id
    i, turns = first, 0
    while i < len(msgs):
        m = msgs[i]
        if m.role == "assistant":
            if m.images:
                raise DataFormatError(f"{conversation.where}: an assistant turn holds images")
            ids = policy.tokenizer.encode(m.text, add_special_tokens=False) + [eos]
            builder.add_turn(Generation(text=m.text, token_ids=ids, logprobs=[0.0] * len(ids)))
            turns += 1
            i += 1
            continue
        group = []
        while i < len(msgs) and msgs[i].role != "assistant":
            group.append(msgs[i])
            i += 1
        if i == len(msgs):
            break  # trailing prompt turns teach nothing
        builder.add_feedback(group)
    return Trajectory(input_ids=list(builder.encoded.input_ids), loss_mask=builder.loss_mask,
                      logprobs=builder.logprobs, struct_mask=builder.struct, encoded=builder.encoded,
                      turns=turns, turn_texts=builder.texts,
                      tool_calls=sum(t.count("<tool_call>") for t in builder.texts))  # fmt: skip


def release_sft_trajectories(policy: HFPolicy, spec: str | Path, limit: int | None = None,
                             video_root: str | Path | None = None) -> tuple[list[Trajectory], int]:  # fmt: skip
    """Trajectories of every readable row (and how many rows were skipped)."""
    conversations, skipped = read_release_sft(spec, limit, video_root)
    return [conversation_trajectory(policy, c) for c in conversations], len(skipped)


__all__ = ["SFT_VIDEO", "SFTConversation", "conversation_trajectory", "parse_row", "read_release_sft",
           "release_sft_files", "release_sft_trajectories"]  # fmt: skip
