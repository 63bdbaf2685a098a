"""Small PDFs written byte by byte for the converter tests (no PDF library needed).

Each page's paragraphs are drawn in Helvetica, one line each, a blank line between
paragraphs; a paragraph starting with ``# `` is drawn at 18 points (a heading), the rest
at 11. Options give what the tests need: document information (title), an outline,
a page of pictures only (an image, no text), and a font whose Unicode map sends every
character to the private-use area (text that extracts garbled).
"""

from __future__ import annotations

from collections.abc import Sequence


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(
    pages: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    outline: Sequence[tuple[str, int]] = (),
    picture_pages: Sequence[int] = (),
    private_use_font: bool = False,
) -> bytes:
    """A PDF whose page ``i`` draws ``pages[i]`` (paragraphs), ``picture_pages`` (0-based)
    an 8×8 grey image instead; ``outline`` is (title, 0-based page) entries."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in last
    pages_id = add(b"")
    font_dict = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding"
    if private_use_font:
        cmap = (
            b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap "
            b"/CMapName /Garble def 1 begincodespacerange <00> <FF> endcodespacerange "
            b"1 beginbfrange <20> <7E> <E000> endbfrange endcmap "
            b"CMapName currentdict /CMap defineresource pop end end"
        )
        to_unicode = add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(cmap), cmap))
        font_dict += b" /ToUnicode %d 0 R" % to_unicode
    font = add(font_dict + b" >>")
    image_data = bytes([128] * 64)
    image = add(
        b"<< /Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Length %d >>\nstream\n%s\nendstream" % (len(image_data), image_data)
    )
    kids: list[int] = []
    for number, paragraphs in enumerate(pages):
        if number in picture_pages:
            content = b"q 400 0 0 400 100 200 cm /Im1 Do Q"
        else:
            lines = []
            for paragraph in paragraphs:
                if paragraph.startswith("# "):  # a heading: 18 points instead of 11
                    lines.append(f"/F1 18 Tf ({_escape(paragraph[2:])}) Tj T* T* /F1 11 Tf")
                else:
                    lines.append(f"({_escape(paragraph)}) Tj T* T*")
            content = ("BT /F1 11 Tf 14 TL 56 760 Td " + " ".join(lines) + " ET").encode("cp1252")
        stream = add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] "
                b"/Resources << /Font << /F1 %d 0 R >> /XObject << /Im1 %d 0 R >> >> "
                b"/Contents %d 0 R >>" % (pages_id, font, image, stream)
            )
        )
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % kid for kid in kids),
        len(kids),
    )
    outline_ref = b""
    if outline:
        root = add(b"")
        items = [len(objects) + 1 + i for i in range(len(outline))]
        for i, (entry, page) in enumerate(outline):
            links = b"/Parent %d 0 R" % root
            if i > 0:
                links += b" /Prev %d 0 R" % items[i - 1]
            if i < len(outline) - 1:
                links += b" /Next %d 0 R" % items[i + 1]
            add(
                b"<< /Title (%s) %s /Dest [%d 0 R /XYZ 0 792 0] >>"
                % (_escape(entry).encode("cp1252"), links, kids[page])
            )
        objects[root - 1] = b"<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count %d >>" % (
            items[0],
            items[-1],
            len(items),
        )
        outline_ref = b" /Outlines %d 0 R" % root
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R%s >>" % (pages_id, outline_ref)
    info = b""
    if title is not None:
        info_id = add(b"<< /Title (%s) >>" % _escape(title).encode("cp1252"))
        info = b" /Info %d 0 R" % info_id
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root %d 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        catalog,
        info,
        xref,
    )
    return bytes(out)
