"""Shared pieces of the ``ragwright`` command: the app, common options, entry point.

The command line only parses arguments into a typed request of
:mod:`ragwright.application`, calls the application the composition root builds, and
prints the typed result. It holds no business logic and imports no adapter.

Exit status: 0 success, 1 invalid input, configuration or an infrastructure fault (the
error goes to stderr as one line and nothing already stored is lost), 2 usage errors (from
the argument parser). docs/operations.md lists the faults and what each one does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragwright import __version__
from ragwright.errors import (
    ChunkingError,
    DocumentError,
    InputTooLong,
    RagwrightError,
    SourceError,
    SourceProblems,
    StorageError,
)
from ragwright.heap import fix_malloc_thresholds

if TYPE_CHECKING:
    from ragwright.application import Application, EvidenceFilter, ThresholdOverrides
    from ragwright.settings import Settings

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Answer questions from your own documents with evidence you can check.",
)

Sources = Annotated[
    list[Path],
    typer.Argument(
        help="Files (.md, .txt, .html/.htm, .docx, .pdf, seeds' .json, BEIR corpus.jsonl) "
        "or directories of them (with an optional ragwright-sources.toml of rules).",
        metavar="SOURCES...",
    ),
]
MaxWords = Annotated[
    int | None,
    typer.Option(
        "--max-words",
        min=1,
        metavar="N",
        help="Word budget per chunk, heading included (default 80).",
    ),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        metavar="N",
        help="Token ceiling per embedding input, counted by the embedding model's tokenizer.",
    ),
]
NoOverlap = Annotated[
    bool, typer.Option("--no-overlap", help="Do not repeat a paragraph across windows.")
]
Policy = Annotated[
    str | None,
    typer.Option(
        "--policy",
        metavar="POLICY",
        help="Chunking policy: section-paragraphs (refuses oversize paragraphs) or "
        "sentence-blocks (splits them at sentence/line boundaries) "
        "(default section-paragraphs).",
    ),
]
DocType = Annotated[
    str | None,
    typer.Option(
        "--type",
        metavar="TYPE",
        help="document_type for files that neither set it nor match a rule.",
    ),
]
DocState = Annotated[
    str | None,
    typer.Option(
        "--state",
        metavar="STATE",
        help="publication_state for files that neither set it nor match a rule.",
    ),
]
EligibleTypes = Annotated[
    list[str] | None,
    typer.Option(
        "--type", metavar="TYPE", help="Eligible document type (repeatable; default runbook)."
    ),
]
EligibleStates = Annotated[
    list[str] | None,
    typer.Option(
        "--state",
        metavar="STATE",
        help="Eligible publication state (repeatable; default published).",
    ),
]
EligibleDocuments = Annotated[
    list[str] | None,
    typer.Option("--document", metavar="ID", help="Restrict to document id (repeatable)."),
]
ChunkingVersion = Annotated[
    str | None,
    typer.Option(
        "--chunking-version",
        metavar="VERSION",
        help="Query this chunking version (default: the one the chunking settings produce "
        "when set, else the only one holding chunks, else the default policy's; "
        "'ragwright status' lists those indexed).",
    ),
]
CallerTenant = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        metavar="TENANT",
        help="Caller's tenant (trusted context; default: untenanted only).",
    ),
]
SearchMode = Annotated[
    str,
    typer.Option(
        "--mode", metavar="MODE", help="dense (cosine), sparse (BM25) or hybrid (RRF of both)."
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _threshold(stage: str, score: str) -> Any:
    return typer.Option(
        f"--threshold-{stage}",
        metavar="SCORE",
        help=f"Minimum {score} score (default: RAGWRIGHT_THRESHOLD_{stage.upper()}"
        + (", else the persisted calibration)." if stage in ("dense", "sparse") else ")."),
    )


ThresholdDense = Annotated[float | None, _threshold("dense", "dense (cosine)")]
ThresholdSparse = Annotated[float | None, _threshold("sparse", "BM25")]
ThresholdFusion = Annotated[float | None, _threshold("fusion", "RRF")]
ThresholdRerank = Annotated[float | None, _threshold("rerank", "rerank")]
SkipInvalid = Annotated[
    bool,
    typer.Option(
        "--skip-invalid",
        help="Leave out every file and document with a problem of its own (front matter, "
        "metadata, a validation rule, a heading over the chunk budget, an embedding input "
        "over the model's limit; a file named on the command line that cannot be read) and "
        "write the rest; each is listed with its reason. Without it they stop the run, all "
        "of them named, before anything is written. Files found in a folder whose text "
        "cannot be read (password, no text layer, garbled, over a conversion limit) are "
        "always left out and listed.",
    ),
]
ShowProgress = Annotated[
    bool,
    typer.Option(
        "--progress",
        help="Print one progress line to stderr every few seconds even when stderr is not "
        "a terminal (on a terminal a progress bar is always shown).",
    ),
]

eval_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Evaluate retrieval on labelled questions; calibrate thresholds; compare and report runs.",
)
app.add_typer(eval_app, name="eval")


def application(settings: Settings | None = None) -> Application:
    """The application over the adapters the settings (default: the environment and
    ``ragwright.toml``) select, built by the composition root; imported here lazily so
    ``--help`` starts fast. It is closed when the command ends (its pools, connections
    and in-process model server released)."""
    from ragwright.runtime import build_application

    built = build_application(settings)
    _built.append(built)
    return built


_built: list[Application] = []


def close_applications() -> None:
    """Close every application the command built (the root command calls it when the
    command ends, however it ends)."""
    while _built:
        built = _built.pop()
        if callable(getattr(type(built), "close", None)):
            built.close()


def evidence_filter(
    types: list[str] | None,
    states: list[str] | None,
    documents: list[str] | None = None,
    chunking_version: str | None = None,
) -> EvidenceFilter:
    """The request's evidence filter from the shared eligibility options. The operator
    may see every type and state, so a result counts what the defaults left out."""
    from ragwright.application import EvidenceFilter

    return EvidenceFilter(
        types=tuple(types or ()),
        states=tuple(states or ()),
        documents=tuple(documents or ()),
        chunking_version=chunking_version,
        also_visible_types=None,
        also_visible_states=None,
    )


_VERSION_REASONS = {
    "request": "as asked",
    "settings": "the one the chunking settings produce",
    "index": "the only one holding chunks",
    "default": "the default policy's, as the index holds chunks under several",
}


def left_out_notes(
    data: dict[str, Any], chunking_version: str, *, eligibility: bool = True
) -> list[str]:
    """What a query's conditions left out, as ``note:`` lines, from a result's JSON form
    (``chunking_version_source``, ``excluded_versions``, ``searched``, ``excluded_types``,
    ``excluded_states``; types and states are counted only where the defaults applied).
    The line about types and states starts with what was searched (``searched``'s note);
    ``eligibility`` false leaves it out."""
    notes = []
    versions = data.get("excluded_versions") or {}
    if versions:
        why = _VERSION_REASONS.get(str(data.get("chunking_version_source")), "")
        counts = ", ".join(f"{plural(n, 'chunk')} under {v}" for v, n in sorted(versions.items()))
        notes.append(
            f"note: only chunking version {chunking_version} was searched"
            f"{f' ({why})' if why else ''}; the index also holds {counts} meeting the same "
            "type, state and tenant conditions (pass --chunking-version VERSION to search "
            "those instead)."
        )
    types, states = data.get("excluded_types") or {}, data.get("excluded_states") or {}
    if eligibility and (types or states):
        counts = ", ".join(
            [f"{plural(n, 'chunk')} of type {t}" for t, n in sorted(types.items())]
            + [f"{plural(n, 'chunk')} in state {s}" for s, n in sorted(states.items())]
        )
        options = " or ".join(
            option for option, left in (("--type", types), ("--state", states)) if left
        )
        notes.append(
            f"note: {data['searched']['note']}; the index also holds {counts} meeting the "
            f"other conditions (pass {options}, repeatable, to search those too)."
        )
    return notes


def threshold_overrides(
    dense: float | None, sparse: float | None, fusion: float | None, rerank: float | None
) -> ThresholdOverrides:
    """The request's threshold overrides from the ``--threshold-*`` options."""
    from ragwright.application import ThresholdOverrides

    return ThresholdOverrides(dense=dense, sparse=sparse, fusion=fusion, rerank=rerank)


def thresholds_line(data: dict[str, Any]) -> str:
    """One line saying which thresholds a result applied and where each came from, from
    its JSON form (``thresholds``, ``thresholds_sources``, ``calibration``)."""
    applied = [
        f"{stage} {value:.4f} ({data['thresholds_sources'][stage]})"
        for stage, value in data["thresholds"].items()
        if value is not None
    ]
    if not applied:
        return "thresholds: none"
    line = "thresholds: " + ", ".join(applied)
    calibration = data["calibration"]
    if calibration is not None:
        line += (
            f"; calibration of {calibration['calibrated_at']} on {calibration['dataset']} "
            f"(sha256 {calibration['dataset_sha256'][:12]})"
        )
    return line


def check_choice(value: str, choices: tuple[str, ...], param: str) -> None:
    """A usage error (exit 2) naming the option when ``value`` is not one of ``choices``."""
    if value not in choices:
        raise typer.BadParameter(f"must be one of {', '.join(choices)}", param_hint=param)


def print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 document``, ``2 documents``."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


def version_callback(value: bool) -> None:
    if value:
        print(f"ragwright {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    context: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """Answer questions from your own documents with evidence you can check."""
    context.call_on_close(close_applications)


def main() -> None:
    """Entry point: usage errors exit 2 (the parser's message), ragwright errors and file
    system faults (disk full, read-only, permission denied) exit 1 with one line on
    stderr; nothing already stored is touched by any of them. A long-running command
    gives freed large blocks back to the system from its start (``ragwright.heap``)."""
    sys.exit(run(sys.argv[1:]))


def run(arguments: list[str]) -> int:
    """Run one command line (without the program's name) in this process; its exit
    status. :func:`main` and a warm command process (``ragwright.warm``) both call it."""
    if _command(arguments) in LONG_RUNNING:
        fix_malloc_thresholds()
    try:
        app(args=arguments, prog_name="ragwright")
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        print(done.code, file=sys.stderr)
        return 1
    except RagwrightError as error:
        print(f"error: {error}{_skip_hint(arguments, error)}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: {storage_error(error)}", file=sys.stderr)
        return 1
    return 0


def _skip_hint(arguments: list[str], error: RagwrightError) -> str:
    """What a refused ``ingest``/``chunks`` can do about one file's or document's own
    problem (several are listed with the same hint by ``SourceProblems``)."""
    if _command(arguments) not in ("ingest", "chunks") or "--skip-invalid" in arguments:
        return ""
    if isinstance(error, SourceProblems):
        return ""
    own = isinstance(error, ChunkingError | InputTooLong) or (
        isinstance(error, DocumentError) and error.source is not None
    )
    if isinstance(error, SourceError) and Path(error.source).is_file():
        own = True
    if not own:
        return ""
    written = "nothing was written; " if _command(arguments) == "ingest" else ""
    return f" ({written}--skip-invalid leaves it out)"


LONG_RUNNING = frozenset({"serve", "worker", "ingest-worker", "ingest", "eval"})
"""Commands that live long or answer many questions: their memory must hold its level.
A one-shot command (``ask``, ``search``) exits before it matters and would pay for it:
fixed thresholds cost an ``ask`` ~50,000 more page faults, 0.2-0.3 s (docs/ingestion.md)."""


def _command(arguments: list[str]) -> str | None:
    """The command named on the command line (its first word that is not an option)."""
    return next((a for a in arguments if not a.startswith("-")), None)


def storage_error(error: OSError) -> StorageError:
    """The one-line form of a file system fault: where it happened and what it was."""
    path = error.filename if error.filename is not None else "file system"
    return StorageError(str(path), error.strerror or str(error))
