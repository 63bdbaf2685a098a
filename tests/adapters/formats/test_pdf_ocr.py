"""A scanned PDF (pages that are pictures of text) is read by OCR when tesseract is
installed, and refused as before, with a hint to install it, when it is not.

The scan is made here: a text PDF from ``pdf_maker`` drawn to a bitmap by PDFium, then
that bitmap placed as the only object of a page in a new PDF (no text layer left).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragwright.adapters.formats import convert_pdf
from ragwright.adapters.formats import ocr as ocr_module
from ragwright.adapters.sources import load_file
from ragwright.errors import UnreadableKind, UnreadableSource
from tests.adapters.formats.pdf_maker import make_pdf

needs_tesseract = pytest.mark.usefixtures("tesseract_installed")

SCANNED = [
    "# Restart the worker",
    "Drain the queue first, then stop the worker process.",
    "The queue holds 500 jobs at most.",
]


def write_scan(tmp_path: Path, pages: list[list[str]], name: str = "scan.pdf") -> Path:
    """A PDF whose pages are pictures of ``pages`` (``[]``: a text page kept as text)."""
    import pypdfium2 as pdfium

    text_pdf = pdfium.PdfDocument(make_pdf([p or ["Plain text page."] for p in pages]))
    scan = pdfium.PdfDocument.new()
    try:
        for index, paragraphs in enumerate(pages):
            if not paragraphs:
                scan.import_pages(text_pdf, [index])
                continue
            source = text_pdf[index]
            width, height = source.get_size()
            bitmap = source.render(scale=3)
            page = scan.new_page(width, height)
            image = pdfium.PdfImage.new(scan)
            image.set_bitmap(bitmap)
            image.set_matrix(pdfium.PdfMatrix().scale(width, height))
            page.insert_obj(image)
            page.gen_content()
        path = tmp_path / name
        scan.save(path)
    finally:
        scan.close()
        text_pdf.close()
    return path


def _words(text: str) -> set[str]:
    return {w.strip(".,").casefold() for w in text.split()}


@needs_tesseract
def test_a_scanned_page_is_read_by_ocr_with_its_page_number(tmp_path: Path) -> None:
    path = write_scan(tmp_path, [[], SCANNED])
    converted = convert_pdf(path)
    headings = [s.heading for s in converted.sections]
    assert headings == ["Page 1", "Page 2 (OCR)"]
    ocr_section = converted.sections[1]
    assert ocr_section.pages == (2,) * len(ocr_section.paragraphs)
    words = _words(" ".join(ocr_section.paragraphs))
    # OCR may misread a character; the key words of every line are there.
    assert {"restart", "worker", "drain", "queue", "process", "500", "jobs"} <= words
    assert len(ocr_section.paragraphs) >= 2  # blank-line separated blocks


@needs_tesseract
def test_an_image_only_pdf_loads_as_a_source_document_saying_ocr(tmp_path: Path) -> None:
    (document,) = load_file(write_scan(tmp_path, [SCANNED]))
    assert [s.heading for s in document.sections] == ["Page 1 (OCR)"]
    assert [s.section_id for s in document.sections] == ["page-1-ocr"]
    assert "queue" in _words(" ".join(document.sections[0].paragraphs))


@needs_tesseract
def test_pictures_without_text_still_refused_after_ocr_reads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "grey.pdf"
    path.write_bytes(make_pdf([["x"]], picture_pages=[0]))
    with pytest.raises(UnreadableSource) as caught:
        convert_pdf(path)
    assert caught.value.kind is UnreadableKind.NO_TEXT_LAYER
    assert "OCR (tesseract) read no text on it" in caught.value.reason


def test_without_tesseract_a_scan_is_refused_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_scan(tmp_path, [SCANNED])
    monkeypatch.setenv("PATH", str(tmp_path / "no-binaries-here"))
    assert ocr_module.tesseract_command() is None
    with pytest.raises(UnreadableSource) as caught:
        convert_pdf(path)
    assert caught.value.kind is UnreadableKind.NO_TEXT_LAYER
    assert "1 page of pictures only (a scan?)" in caught.value.reason
    assert "install tesseract-ocr" in caught.value.reason


def test_tesseract_output_becomes_paragraphs_at_blank_lines() -> None:
    output = "Restart the\nworker now.\n\n\nDrain the queue be-\nfore stopping.\n\x0c"
    assert ocr_module.paragraphs_of(output) == [
        "Restart the worker now.",
        "Drain the queue before stopping.",
    ]
