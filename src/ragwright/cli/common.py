"""Shared pieces of the ``ragwright`` command: the app, common options, helpers, entry point.

Exit status: 0 success, 1 invalid input or configuration (the error goes to stderr and
nothing already stored is lost), 2 usage errors (from the argument parser).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragwright import __version__
from ragwright.adapters.sources import SkippedDocument, SourceDefaults, load_sources
from ragwright.errors import RagwrightError
from ragwright.settings import Settings, load_settings
from ragwright.types import SourceDocument

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Answer questions from your own documents with evidence you can check.",
)
_err = Console(stderr=True)

Sources = Annotated[
    list[Path], typer.Argument(help="Markdown/JSON files, BEIR corpus.jsonl, or directories.")
]
MaxWords = Annotated[
    int | None,
    typer.Option(
        "--max-words", min=1, help="Word budget per chunk, heading included (default 80)."
    ),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
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
        help="section-paragraphs (refuses oversize paragraphs) or sentence-blocks "
        "(splits them at sentence/line boundaries) (default section-paragraphs).",
    ),
]
DocType = Annotated[
    str | None, typer.Option("--type", help="document_type for files that do not set it.")
]
DocState = Annotated[
    str | None, typer.Option("--state", help="publication_state for files that do not set it.")
]
EligibleTypes = Annotated[
    list[str] | None, typer.Option("--type", help="Eligible document type (repeatable).")
]
EligibleStates = Annotated[
    list[str] | None, typer.Option("--state", help="Eligible publication state (repeatable).")
]
CallerTenant = Annotated[
    str | None,
    typer.Option("--tenant", help="Caller's tenant (trusted context; default: untenanted only)."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _settings(
    max_words: int | None, no_overlap: bool, policy: str | None, max_tokens: int | None = None
) -> Settings:
    overrides: dict[str, Any] = {}
    if max_words is not None:
        overrides["max_words"] = max_words
    if max_tokens is not None:
        overrides["max_tokens"] = max_tokens
    if no_overlap:
        overrides["overlap"] = False
    if policy is not None:
        overrides["chunking"] = policy
    return load_settings(**overrides)


def _documents(
    sources: list[Path],
    settings: Settings,
    doc_type: str | None,
    state: str | None,
    on_invalid: Callable[[SkippedDocument], None] | None = None,
) -> list[SourceDocument]:
    defaults = SourceDefaults(
        document_type=doc_type, publication_state=state, document_types=settings.document_types
    )
    return load_sources(sources, defaults, on_invalid=on_invalid)


eval_app = typer.Typer(
    no_args_is_help=True,
    help="Evaluate retrieval on labelled questions; calibrate thresholds; compare and report runs.",
)
app.add_typer(eval_app, name="eval")


class _Progress:
    """A rich progress bar fed by ingestion or calibration events; silent when not on a terminal."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=_err,
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()

    def __call__(self, event: str, count: int) -> None:
        if not self.enabled:
            return
        totals = {"plan": "chunks", "questions": "questions", "combinations": "combinations"}
        if event in totals:
            self._task = self._bar.add_task(totals[event], total=count)
        elif self._task is not None and event in ("unchanged", "embedded", "retrieved", "swept"):
            self._bar.advance(self._task, count)


def version_callback(value: bool) -> None:
    if value:
        print(f"ragwright {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """Answer questions from your own documents with evidence you can check."""


def main() -> None:
    """Entry point: usage errors exit 2 (the parser's message), ragwright errors exit 1
    with one line on stderr; nothing already stored is touched by either."""
    try:
        app()
    except RagwrightError as error:
        _err.print(f"error: {error}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)
