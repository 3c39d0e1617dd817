"""``paravt``: one entry point, one module per subcommand.

Each subcommand module exposes ``add_parser(subparsers)`` (which sets ``func`` on its parser) and is
imported lazily by name so that ``paravt synth`` never pays for importing torch.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import sys
import warnings
from pathlib import Path

# name -> (module, one-line help). Modules are imported only when their subcommand runs or --help is asked.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "synth": ("paravt.cli.synth", "generate synthetic needle-in-a-haystack long videos with questions"),
    "train": ("paravt.cli.train", "train a policy on the env (SFT cold start + GRPO / PARA-GRPO) from a recipe"),
    "export": ("paravt.cli.export", "export a dataset for another engine (openrlhf, verl), played as a recipe trains it"),
    "eval": ("paravt.cli.eval", "evaluate a policy on a dataset (resumable), or compare runs"),
    "tiny-model": ("paravt.cli.tiny_model", "build a tiny random-weight Qwen-VL checkpoint locally (tests, CPU default)"),
    "serve": ("paravt.cli.serve", "serve a local checkpoint over OpenAI-compatible and sglang-style HTTP (CPU dev server)"),
    "serve-env": ("paravt.cli.serve_env", "serve the env over HTTP: many sessions of reset / step for remote agents and trainers"),
    "repro": ("paravt.cli.repro", "the paper's training comparison at CPU scale: shared cold start, 6 arms x seeds, report"),
    "probe": ("paravt.cli.probe", "probe a checkpoint: do its answers follow the pixels (perception)? can it write its parallel calls (calls)?"),
    "view": ("paravt.cli.view", "a self-contained HTML page of what the agent did, episode by episode (timelines, frames, texts)"),
    "bench": ("paravt.cli.bench", "benchmarks: parallel vs sequential tool dispatch"),
}


# Modules of an optional extra -> how to install it. The light install (pip install -e .) has the env only.
EXTRAS = {"torch": "train", "transformers": "train", "safetensors": "train", "tokenizers": "train", "PIL": "train",
          "matplotlib": "plot", "pyarrow": "data", "fastapi": "serve", "uvicorn": "serve", "starlette": "serve",
          "websockets": "serve"}  # fmt: skip


def install_hint(exc: BaseException) -> str:
    """For a missing optional package: which extra provides it and the command that installs it."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or name not in EXTRAS:
        return ""
    extra = EXTRAS[name]
    first = "pip install torch==2.13.0 (CPU; a plain torch pulls the CUDA build) && " if extra == "train" else ""
    return f"; this command needs the [{extra}] extra: {first}pip install -e \".[{extra}]\" (or \"paravt-gym[{extra}]\")"


def _version() -> str:
    """The installed distribution's version (``pyproject.toml``), without importing anything heavy."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("paravt-gym")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="paravt", description="ParaVT-Gym: parallel video tool calling.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text)
            continue
        importlib.import_module(module).add_parser(sub, name, help_text)
    return parser


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads N``: torch's CPU thread count for a command that runs a model (``paravt.learners.threads``)."""
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="torch CPU threads (default: $PARAVT_THREADS, else half the usable cores: torch's one "
                             "thread per core slows a model several-fold when anything else runs)")  # fmt: skip


def apply_threads(args: argparse.Namespace, workers: int = 1) -> int:
    """Set torch's thread count from ``--threads`` / ``PARAVT_THREADS`` / the default; returns it."""
    from paravt.learners.threads import set_torch_threads

    return set_torch_threads(getattr(args, "threads", None), workers)


# How to continue what an interrupt stopped, by command (the saved state is kept; the same command resumes).
CONTINUE = {
    "train": "rerun the same command with --resume to continue from the last checkpoint",
    "eval": "rerun the same command (same --out) to score the samples not yet scored",
    "repro": "rerun the same command (same --out) to continue",
    "bench": "rerun the same command (same --out) to continue: the samples every cell has played are kept",
}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its sub-command parsers."""
    out = set()
    for action in parser._actions:
        out.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _options(sub)
    return out


def unknown_option(parser: argparse.ArgumentParser, command: str | None, argv: list[str]) -> str | None:
    """A ``--flag`` of ``argv`` that neither ``paravt`` nor ``command`` knows, with the closest known one; None if
    all are known. argparse would otherwise read a misspelt flag's value as a positional and name that instead
    (``--frame-bugdet 8``: "invalid choice: '8'")."""
    import difflib

    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if command is None or sub is None or command not in sub.choices:
        return None
    known = _options(parser) | _options(sub.choices[command])
    for token in argv[argv.index(command) + 1 :]:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if name.startswith("--") and name not in known and not any(k.startswith(name) for k in known):  # argparse takes prefixes
            close = difflib.get_close_matches(name, sorted(known), n=1)
            return f"unrecognized option {name}" + (f" (did you mean {close[0]}?)" if close else "")
    return None


def error_text(exc: BaseException) -> str:
    """An error in words. An OS error names its path and what is wrong with it rather than Python's
    ``[Errno 17] File exists: 'runs/afile'``: a file where a directory is needed is said so."""
    if not isinstance(exc, OSError) or not exc.filename or exc.strerror is None:
        return str(exc)
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        path = Path(os.fsdecode(exc.filename))
        blocker = next((p for p in (path, *path.parents) if p.is_file()), None)
        if blocker is not None:
            return f"{blocker} is a file where a directory is needed: choose another path, or move the file away"
    where = os.fsdecode(exc.filename) + (f" -> {os.fsdecode(exc.filename2)}" if exc.filename2 else "")
    return f"{where}: {exc.strerror[0].lower()}{exc.strerror[1:]}"


class _Once(logging.Filter):
    """Lets each warning or error message through once per command: a message a code path repeats (the same
    resume notice from two places) is said once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


@contextlib.contextmanager
def said_once(command: str):
    """For one command: Python warnings as one line each, ``paravt COMMAND: warning: ...`` (not a source path and
    a ``UserWarning`` label), and every warning, Python's or logged, said once."""
    seen: set[str] = set()

    def formatted(message, category, filename, lineno, line=None) -> str:  # noqa: ARG001 (formatwarning's signature)
        text = str(message)
        if text in seen:
            return ""  # said already: Python writes an empty string
        seen.add(text)
        return f"paravt {command}: warning: {text}\n"

    filters = [(handler, _Once()) for handler in logging.getLogger().handlers]  # one each: every handler says it once
    for handler, once in filters:
        handler.addFilter(once)
    # Only the text is ours: which warnings show stays Python's filters' decision, and a caller that records them
    # (warnings.catch_warnings(record=True), pytest.warns) still gets every one.
    previous = warnings.formatwarning
    warnings.formatwarning = formatted
    try:
        yield
    finally:
        warnings.formatwarning = previous
        for handler, once in filters:
            handler.removeFilter(once)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in SUBCOMMANDS else None)
    problem = unknown_option(parser, command, argv)
    if problem:
        parser.print_usage(sys.stderr)
        print(f"paravt {command}: error: {problem}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s"
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from paravt_env.environ import EnvironmentVariableError, check_environment

    try:  # before any work: a bad variable would otherwise surface hours in, far from where it was set
        check_environment()
    except EnvironmentVariableError as exc:
        print(f"paravt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    with said_once(args.command):
        return _run(args)


def quiet_third_party_bars() -> None:
    """No progress bars of transformers / huggingface_hub (loading weights, writing shards): ``--no-progress``
    means none at all. The variable covers the libraries not imported yet, the calls those already imported."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()


def _run(args: argparse.Namespace) -> int:
    """The subcommand, its errors turned into one line each."""
    if getattr(args, "no_progress", False):
        quiet_third_party_bars()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        hint = CONTINUE.get(args.command)
        print("interrupted" + (f": {hint}" if hint else ""), file=sys.stderr)
        return 130
    except (FileNotFoundError, ValueError, OSError, ImportError) as exc:
        print(f"paravt {args.command}: error: {error_text(exc)}{install_hint(exc)}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # a corrupt video or a failing server named by the library: still one line
        from paravt.policies.remote import ServerError
        from paravt_env.video import VideoDecodeError

        if not isinstance(exc, (VideoDecodeError, ServerError)):
            raise
        print(f"paravt {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
