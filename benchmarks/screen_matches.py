"""How often the instruction screen matches ordinary text: titles, headings, paragraphs.

The screen (``core/screen.py``) reads every field the answering model sees. A match on an
ordinary field costs that chunk its support (never adds any), so the false-match rate over
real documents is what this measures: the OpenShift runbooks (Markdown: titles, nested
headings, paragraphs), the ClapNQ passages and the SciFact abstracts from the shared data
(``../shared/data``, read in place; nothing of it is copied). None of these documents is
written to the model, so every match is a false one.

Fields are counted one by one (``addresses_the_model``); chunks as the answer path
screens them (``screened_sources``), with every chunk of a document among the sources at
once (the worst case: each chunk screened for its neighbours and its document too), the
documents cut by ``CHUNKING`` (``sentence-blocks``, so SciFact's one-paragraph abstracts
chunk too). Writes ``benchmarks/results/screen_matches.json`` with counts and the ids and
fields matched (never the matched text).

    python benchmarks/screen_matches.py
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ragwright.adapters.sources import SourceDefaults, load_sources
from ragwright.core.assembly import Candidate, SelectedSource
from ragwright.core.chunking import build_chunks
from ragwright.core.screen import addresses_the_model, decoded_runs, screened_sources
from ragwright.types import ChunkingPolicy, SourceDocument

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
CORPORA = {
    "openshift-runbooks": DATA / "runbooks" / "openshift" / "alerts",
    "clapnq": DATA / "clapnq" / "markdown",
    "scifact": DATA / "scifact" / "corpus.jsonl",
}
CHUNKING = ChunkingPolicy(kind="sentence-blocks")


def chunk_sources(document: SourceDocument) -> list[SelectedSource]:
    """Every chunk of ``document`` as an admitted source, its whole text included."""
    sources = []
    for number, chunk in enumerate(build_chunks(document, CHUNKING), start=1):
        candidate = Candidate(
            document.document_id,
            chunk.chunk_id,
            chunk.chunking_version,
            chunk.section_id,
            document.title,
            chunk.heading,
            chunk.text,
            1.0,
            positions=chunk.positions,
        )
        body = chunk.text.removeprefix(f"{chunk.heading}\n\n")
        sources.append(SelectedSource(f"S{number}", candidate, body))
    return sources


def main() -> None:
    record: dict[str, Any] = {}
    for name, path in CORPORA.items():
        if not path.exists():
            print(f"{name}: {path} is missing; skipped")
            continue
        counts: Counter[str] = Counter()
        matched: list[dict[str, str]] = []
        for document in load_sources(
            [path], SourceDefaults("note", "published"), on_invalid=lambda _: None
        ):
            fields = [("title", document.title)]
            for section in document.sections:
                fields.append(("heading", section.heading))
                fields.extend(("paragraph", p) for p in section.paragraphs)
            for kind, text in fields:
                counts[kind] += 1
                counts[f"{kind}_base64_decoded"] += bool(decoded_runs(text))
                if addresses_the_model(text):
                    counts[f"{kind}_matched"] += 1
                    matched.append({"document_id": document.document_id, "field": kind})
            sources = chunk_sources(document)
            screened = screened_sources(sources)
            counts["chunk"] += len(sources)
            counts["chunk_screened"] += len(screened)
            for source in sources:
                if source.label in screened:
                    matched.append(
                        {"document_id": document.document_id, "chunk_id": source.candidate.chunk_id}
                    )
        record[name] = {"counts": dict(sorted(counts.items())), "matched": matched}
        print(name, dict(sorted(counts.items())))
    out = ROOT / "benchmarks" / "results" / "screen_matches.json"
    out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
