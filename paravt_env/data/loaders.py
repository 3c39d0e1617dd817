"""``load_samples``: read the QA data people already have into ``VideoQASample`` lists.

Formats (``format="auto"`` tells them apart by file type and keys; see ``paravt_env/data/formats/``):

- ``jsonl``: our own rows (``VideoQASample`` fields; what ``paravt synth`` writes), or a directory holding
  ``samples.jsonl``;
- ``paravt``: the released ParaVT RL parquet (``prompt`` with a ``<video>`` placeholder, ``videos``,
  ``extra_info`` with ``answer`` and ``question_type``);
- the annotation files of ``videomme``, ``longvideobench``, ``lvbench``, ``mlvu``, ``mmvu`` and
  ``charades_sta``, as lmms-eval reads them (parquet / JSON) and as the benchmarks released them (JSON,
  JSONL, Charades-STA's ``.txt``).

Relative video paths resolve against ``video_root``, or else against the annotation file's folder and its
parent; each benchmark's usual layout is tried (``data/<videoID>.mp4`` for Video-MME, ``videos/`` for
LongVideoBench, ``Charades_v1_480/`` for Charades-STA, ...) with the common video extensions. Rows whose
video is missing are skipped with one warning that counts them (``strict=True`` raises
``FileNotFoundError`` instead). A malformed row raises ``DataFormatError`` (a ``ValueError``) naming the
file, the row and the field.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .formats import ALIASES, FORMATS, READERS, Candidate, DataFormatError, RowContext, ours
from .sample import VideoQASample

SUFFIXES = (".jsonl", ".json", ".parquet", ".txt")


# --- reading files ------------------------------------------------------------------------------------------
def iter_rows(path: Path, batch_rows: int = 256) -> Iterator[tuple[str, Any]]:
    """(location, row) pairs of a file, streamed where the format allows: a parquet file one record batch at a
    time (``batch_rows`` rows, never the whole table; pyarrow reads a row group at a time, so a file written
    as one huge row group is held whole), JSON Lines one line at a time. A ``.json`` array or a ``.txt`` file
    is read whole (``read_rows``). Locations as in ``read_rows``.
    A file that cannot be read (a truncated or corrupt parquet shard, bytes that are not UTF-8, a line that is not
    JSON) raises ``DataFormatError`` naming the file and the row or line where reading stopped."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(f'reading {path} needs pyarrow: pip install "paravt-gym[data]"') from exc
        i = 0
        try:
            with pq.ParquetFile(path) as f:
                for batch in f.iter_batches(batch_size=batch_rows):
                    for row in batch.to_pylist():
                        yield f"row {i}", row
                        i += 1
        except (pa.ArrowException, OSError) as exc:
            raise DataFormatError(f"{path}: row {i}: the parquet file cannot be read there ({exc})") from None
        return
    if suffix == ".jsonl":
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise DataFormatError(f"{path}: line {n}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
                if line.strip():
                    try:
                        yield f"line {n}", json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataFormatError(f"{path}: line {n}: invalid JSON: {exc.msg}") from None
        return
    yield from read_rows(path)


def read_rows(path: Path) -> list[tuple[str, Any]]:
    """(location, row) pairs of a file; the location names the line (from 1) or the row (from 0)."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(f'reading {path} needs pyarrow: pip install "paravt-gym[data]"') from exc
        return [(f"row {i}", r) for i, r in enumerate(pq.read_table(path).to_pylist())]
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: some annotation files start with a BOM
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if suffix == ".txt":
        return [
            (f"line {n}", {"_line": line.strip()})
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    if suffix == ".json":
        try:
            return _json_rows(json.loads(text))
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                raise DataFormatError(f"{path}: invalid JSON: {exc.msg} (line {exc.lineno})") from None
            # A ".json" file that is really JSON Lines: read it as such.
    if suffix in (".jsonl", ".json"):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((f"line {n}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise DataFormatError(f"{path}: line {n}: invalid JSON: {exc.msg}") from None
        return rows
    raise DataFormatError(f"{path}: unsupported file type {path.suffix!r}; expected one of {SUFFIXES}")


def _json_rows(data: Any) -> list[tuple[str, Any]]:
    if isinstance(data, list):
        return [(f"row {i}", r) for i, r in enumerate(data)]
    if isinstance(data, dict):
        lists = {k: v for k, v in data.items() if isinstance(v, list)}
        if lists and len(lists) == len(data):  # {"data": [...]} or {task: [...], ...}
            return [(f"{k!r} row {i}", r) for k, v in lists.items() for i, r in enumerate(v)]
        if data and all(isinstance(v, dict) for v in data.values()):  # {video_id: {...}, ...}
            return [(f"key {k!r}", {"_key": k, **v}) for k, v in data.items()]
        return [("row 0", data)]
    raise DataFormatError(f"expected a JSON list or object of rows, got {type(data).__name__}")


def detect_format(rows: list[Any], path: str | os.PathLike = "<rows>") -> str:
    """Name the schema of ``rows`` (dicts, or (location, dict) pairs) from the keys of the first row."""
    first = next((r[1] if isinstance(r, tuple) else r for r in rows), None)
    if first is None:
        return "jsonl"
    if not isinstance(first, dict):
        raise DataFormatError(f"{path}: rows must be JSON objects, got {type(first).__name__}")
    keys = set(first)
    for name, module in READERS.items():
        if module.matches(keys):
            return name
    if keys >= ours.REQUIRED:  # our schema with a stray field: read it as ours, so the error names the field
        return "jsonl"
    raise DataFormatError(
        f"{path}: cannot tell the format from the keys {sorted(keys)}; pass format= one of {FORMATS}"
    )


# --- entry point --------------------------------------------------------------------------------------------
def load_samples(
    path: str | os.PathLike,
    video_root: str | os.PathLike | None = None,
    *,
    format: str = "auto",
    strict: bool = False,
    keep_missing: bool = False,
) -> list[VideoQASample]:
    """Read a QA file (or a directory holding ``samples.jsonl``) into samples whose ``video_path`` exists.

    Rows whose video is missing are skipped with one warning that counts them (``strict=True`` raises);
    ``keep_missing=True`` keeps them, pointing at the expected path, for callers that must count every row
    asked for (an evaluation reports them as errors instead of shrinking ``n``).

    ``format`` is ``"auto"`` or one of ``FORMATS``. Sample ids are made unique (a repeated id gets ``#2``,
    ``#3``, ... appended) because the frame budget and caches key on them.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        listing = sorted(p.name for p in path.iterdir() if p.suffix.lower() in SUFFIXES)
        if not (path / "samples.jsonl").is_file():
            if not listing:  # nothing to suggest: say what a data directory holds
                raise FileNotFoundError(f"{path} holds no samples.jsonl and no data file ({', '.join(sorted(SUFFIXES))}): "
                                        "give the directory paravt synth --out wrote, or a samples file")  # fmt: skip
            shown = ", ".join(listing[:10]) + (f" and {len(listing) - 10} more" if len(listing) > 10 else "")
            raise FileNotFoundError(f"{path} is a directory without samples.jsonl; pass one of its files instead: {shown}")
        path = path / "samples.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"sample file not found: {str(path)!r}")
    rows = read_rows(path)
    fmt = ALIASES.get(format, format)
    if fmt == "auto":
        fmt = detect_format(rows, path)
    if fmt not in READERS:
        raise ValueError(f"unknown data format {format!r}; choose 'auto' or one of {FORMATS}")
    reader = READERS[fmt]
    roots = [Path(video_root).expanduser()] if video_root is not None else [path.parent, path.parent.parent]

    samples: list[VideoQASample] = []
    missing: list[str] = []
    for where, row in rows:
        ctx = RowContext(path, f"{path}: {where}")
        if not isinstance(row, dict):
            raise ctx.error(f"expected a JSON object, got {type(row).__name__}")
        try:
            candidates = reader.read(row, ctx)
        except DataFormatError:
            raise
        except (TypeError, ValueError) as exc:  # a field the sample refuses (a NaN duration, say): name the row
            raise ctx.error(str(exc)) from None
        for cand in candidates:
            found = _find(cand.videos, roots)
            if found is None:
                missing.append(str(_join(roots[0], cand.videos[0])))
                if keep_missing:
                    cand.sample.video_path = missing[-1]
                    samples.append(cand.sample)
                continue
            cand.sample.video_path = str(found)
            _attach_subtitles(cand, found, roots)
            samples.append(cand.sample)
    if missing:
        where = f"under {roots[0]}" if video_root is not None else f"beside {path.name}"
        total = len(samples) if keep_missing else len(missing) + len(samples)
        message = (
            f"{'kept' if keep_missing else 'skipped'} {len(missing)} of {total} samples of {path}: video not "
            f"found {where} (first: {missing[0]})"
        )
        if strict:
            raise FileNotFoundError(message)
        warnings.warn(message, stacklevel=2)
    _unique_ids(samples)
    return samples


def _join(root: Path, candidate: str) -> Path:
    p = Path(os.path.expanduser(candidate.removeprefix("file://")))
    return p if p.is_absolute() else root / p


def _find(candidates: list[str], roots: list[Path]) -> Path | None:
    for root in roots:
        for candidate in dict.fromkeys(candidates):
            p = _join(root, candidate)
            if p.is_file():
                return p.resolve() if ".." in p.parts else p
    return None


def _attach_subtitles(cand: Candidate, video: Path, roots: list[Path]) -> None:
    if not cand.subtitles:
        return
    for base in (video.parent, video.parent.parent, *roots):
        for name in cand.subtitles:
            p = base / name
            if p.is_file():
                cand.sample.extra["subtitle_path"] = str(p)
                return


def _unique_ids(samples: list[VideoQASample]) -> None:
    """Repeated ids get ``#2``, ``#3``, ... skipping any id already taken, in the file or by an earlier rename
    (ids ``a``, ``a#2``, ``a`` become ``a``, ``a#2``, ``a#3``): results and resumes are keyed by id."""
    taken = {s.id for s in samples}
    seen: set[str] = set()
    for s in samples:
        if s.id in seen:
            n, base = 2, s.id
            while f"{base}#{n}" in taken:
                n += 1
            s.id = f"{base}#{n}"
            taken.add(s.id)
        seen.add(s.id)


__all__ = ["FORMATS", "DataFormatError", "detect_format", "iter_rows", "load_samples", "read_rows"]
