"""OCR for PDF pages that are pictures only (scans), with the ``tesseract`` command.

Tesseract is an offline engine Debian packages (``tesseract-ocr`` and its English
data ``tesseract-ocr-eng``); ragwright calls its command, so no Python package is
needed. A page is drawn by PDFium at :data:`DPI` in greyscale, written as a PGM file
(a short header and the pixels, which tesseract reads without any imaging library),
and read with ``tesseract page.pgm stdout -l eng``: one process per page, one thread
(``OMP_THREAD_LIMIT=1``, so a run leaves the other cores to the rest), at most
:data:`TIMEOUT_SECONDS`. Blocks that tesseract separates by a blank line are
paragraphs; the lines inside a block are joined with spaces, a word hyphenated at a
line end joined again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

DPI = 300
TIMEOUT_SECONDS = 120
LANGUAGE = "eng"
INSTALL_HINT = "install tesseract-ocr and tesseract-ocr-eng (Debian packages) to read it by OCR"


class OcrFailed(Exception):
    """Tesseract could not read a page (it failed, or took longer than the timeout)."""


def tesseract_command() -> str | None:
    """The ``tesseract`` executable on ``PATH``, or ``None`` when it is not installed."""
    return shutil.which("tesseract")


def _pgm(page: Any) -> bytes:
    """The page drawn at :data:`DPI` in greyscale, as a binary PGM (P5) image."""
    import numpy as np  # noqa: PLC0415

    bitmap = page.render(scale=DPI / 72, grayscale=True)
    try:
        pixels = np.ascontiguousarray(bitmap.to_numpy(), dtype=np.uint8)
    finally:
        bitmap.close()
    if pixels.ndim == 3:
        pixels = np.ascontiguousarray(pixels[:, :, 0])
    height, width = pixels.shape
    return b"P5\n%d %d\n255\n" % (width, height) + pixels.tobytes()


def paragraphs_of(output: str) -> list[str]:
    """Tesseract's text cut into paragraphs at blank lines (see the module docstring)."""
    paragraphs: list[str] = []
    for block in output.replace("\x0c", "\n").split("\n\n"):
        text = ""
        for line in (" ".join(raw.split()) for raw in block.splitlines()):
            if not line:
                continue
            if text.endswith("-") and len(text) > 1 and text[-2].isalpha() and line[0].islower():
                text = text[:-1] + line
            else:
                text = f"{text} {line}" if text else line
        if text:
            paragraphs.append(text)
    return paragraphs


def ocr_page(command: str, page: Any) -> list[str]:
    """The paragraphs tesseract reads on one PDF page; :class:`OcrFailed` if it cannot."""
    image = _pgm(page)
    with tempfile.TemporaryDirectory(prefix="ragwright-ocr-") as folder:
        path = Path(folder) / "page.pgm"
        path.write_bytes(image)
        try:
            done = subprocess.run(  # a fixed argument list, no shell
                [command, str(path), "stdout", "-l", LANGUAGE],
                capture_output=True,
                timeout=TIMEOUT_SECONDS,
                env={**os.environ, "OMP_THREAD_LIMIT": "1"},
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise OcrFailed(f"tesseract took longer than {TIMEOUT_SECONDS} s") from error
        except OSError as error:
            raise OcrFailed(f"tesseract could not run: {error}") from error
    if done.returncode != 0:
        message = " ".join(done.stderr.decode("utf-8", "replace").split())[-200:]
        raise OcrFailed(f"tesseract exited with {done.returncode}: {message}")
    return paragraphs_of(done.stdout.decode("utf-8", "replace"))
