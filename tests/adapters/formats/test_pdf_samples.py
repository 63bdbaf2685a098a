"""The public PDF test files in ../shared/data/documents/pdf-samples: every one either
reads with its text in reading order or is refused with the right reason.

Expected outcomes come from ``files.json`` (``encrypted``: refused as
password-protected) and, where it has no field for it, from what the files are (the
table in docs/ingestion.md, "Real PDFs"): ImageMagick's and the two image samples'
pages are pictures only (with no text in them: OCR, when tesseract is installed, reads
nothing, so they stay ``no_text_layer`` either way), and the Arabic samples' fonts map
glyphs to the wrong code points (PDFium extracts ``ϲΒϴΒ\\x03habibi``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragwright.adapters.sources import load_file
from ragwright.core.chunking import build_chunks
from ragwright.errors import UnreadableKind, UnreadableSource
from ragwright.types import ChunkingPolicy
from tests.conftest import shared_data

pytestmark = pytest.mark.shared_data

REFUSED_BY_CONTENT = {
    "007-imagemagick-images/": UnreadableKind.NO_TEXT_LAYER,
    "019-grayscale-image/": UnreadableKind.NO_TEXT_LAYER,
    "023-cmyk-image/": UnreadableKind.NO_TEXT_LAYER,
    "015-arabic/": UnreadableKind.GARBLED,
}
# Long PDF paragraphs need a policy that splits blocks (as long Markdown ones do).
POLICY = ChunkingPolicy(kind="sentence-blocks", max_words=120)


def expected(entry: dict[str, object]) -> UnreadableKind | None:
    if entry["encrypted"]:
        return UnreadableKind.PASSWORD_PROTECTED
    path = str(entry["path"])
    return next((k for prefix, k in REFUSED_BY_CONTENT.items() if path.startswith(prefix)), None)


def test_every_sample_reads_or_is_refused_for_the_right_reason() -> None:
    root = shared_data("documents", "pdf-samples")
    entries = json.loads((root / "files.json").read_text("utf-8"))["data"]
    present = [e for e in entries if (root / e["path"]).is_file()]
    assert len(present) >= 29, "the sample folder changed"
    outcomes: dict[str, str] = {}
    for entry in present:
        path: Path = root / entry["path"]
        want = expected(entry)
        try:
            (document,) = load_file(path)
        except UnreadableSource as refusal:
            outcomes[entry["path"]] = str(refusal.kind)
            assert refusal.kind == want, f"{entry['path']}: {refusal.reason}"
            continue
        outcomes[entry["path"]] = "read"
        assert want is None, f"{entry['path']} was read, expected {want}"
        chunks = build_chunks(document, POLICY)
        assert chunks, entry["path"]
        pages = {p for c in chunks if c.pages for p in range(c.pages[0], c.pages[1] + 1)}
        assert pages and max(pages) <= int(entry["pages"]), entry["path"]
    assert sorted(set(outcomes.values())) == [
        "garbled",
        "no_text_layer",
        "password_protected",
        "read",
    ]


def _text(relative: str) -> str:
    (document,) = load_file(shared_data("documents", "pdf-samples", relative))
    return " ".join(p for s in document.sections for p in s.paragraphs)


def test_two_columns_read_column_by_column() -> None:
    text = _text("026-latex-multicolumn/multicolumn.pdf")
    # Sentences that cross a line break inside the first column, then the second.
    assert "Curabitur dictum gravida mauris. Nam arcu libero" in text
    assert "Integer sapien est, iaculis in, pretium quis, viverra ac, nunc." in text


def test_an_outline_gives_the_sections_in_order() -> None:
    (document,) = load_file(
        shared_data("documents", "pdf-samples", "006-pdflatex-outline/pdflatex-outline.pdf")
    )
    assert [s.heading for s in document.sections][1:4] == ["1 Foo", "2 Bar", "3 Baz"]
    assert [s.pages[0] for s in document.sections if s.pages][1:4] == [2, 2, 2]
