"""One converter per file format, chosen by the file's extension.

Each converter is a function ``(path, limits) -> ConvertedDocument`` that reads one
file's text in reading order or raises :class:`~ragwright.errors.UnreadableSource`
(password, no text layer, corrupt, garbled, no text, over a limit). Callers go through
:func:`~ragwright.adapters.formats.box.convert`, which checks the file's size before it
is read and runs PDF, Word and large files in a child process bounded in time and
memory (``box.py``; the limits are ``limits.py``). The metadata is decided afterwards,
the same way for every format (``adapters/source_metadata.py``); ``adapters/sources.py``
walks folders and ``load_file`` there turns one file into a validated document.

=================  ======================  ====================================
extension          module                  library (licence)
=================  ======================  ====================================
``.md``            ``markdown.py``         markdown-it-py (MIT), PyYAML (MIT)
``.txt``           ``text.py``             standard library
``.html``/``.htm`` ``html.py``             beautifulsoup4 (MIT), stdlib parser
``.docx``          ``docx.py``             python-docx (MIT)
``.pdf``           ``pdf.py``              pypdfium2 (Apache-2.0 / BSD-3), PDFium
=================  ======================  ====================================
"""

from __future__ import annotations

from collections.abc import Mapping

from ragwright.adapters.formats.box import Converter
from ragwright.adapters.formats.converted import ConvertedDocument
from ragwright.adapters.formats.docx import convert_docx
from ragwright.adapters.formats.html import convert_html
from ragwright.adapters.formats.markdown import convert_markdown
from ragwright.adapters.formats.pdf import convert_pdf
from ragwright.adapters.formats.text import convert_text

CONVERTERS: Mapping[str, Converter] = {
    ".md": convert_markdown,
    ".txt": convert_text,
    ".html": convert_html,
    ".htm": convert_html,
    ".docx": convert_docx,
    ".pdf": convert_pdf,
}
"""Converters by lower-case file extension."""

__all__ = [
    "CONVERTERS",
    "ConvertedDocument",
    "Converter",
    "convert_docx",
    "convert_html",
    "convert_markdown",
    "convert_pdf",
    "convert_text",
]
