"""Each format's converter: structure in reading order, and every refusal kind."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ragwright.adapters.formats import convert_docx, convert_html, convert_pdf, convert_text
from ragwright.adapters.formats.quality import assess_text
from ragwright.adapters.sources import load_file
from ragwright.errors import UnreadableKind, UnreadableSource
from tests.adapters.formats.pdf_maker import make_pdf

PAGES = [
    ["Restart the worker", "Drain the queue first, then stop the worker process."],
    ["Roll back", "Roll back with the previous image tag and watch the error rate."],
    ["The queue holds 500 jobs at most."],
]


def write_pdf(tmp_path: Path, name: str = "runbook.pdf", **options: object) -> Path:
    path = tmp_path / name
    pages = options.pop("pages", PAGES)
    path.write_bytes(make_pdf(pages, **options))  # type: ignore[arg-type]
    return path


# --- PDF ---------------------------------------------------------------------------------


def test_pdf_pages_become_sections_and_every_paragraph_records_its_page(tmp_path: Path) -> None:
    converted = convert_pdf(write_pdf(tmp_path, title="Worker runbook"))
    assert (converted.title, converted.title_from) == ("Worker runbook", "PDF metadata")
    assert [(s.heading, s.pages) for s in converted.sections] == [
        ("Page 1", (1, 1)),
        ("Page 2", (2, 2)),
        ("Page 3", (3,)),
    ]
    assert converted.sections[1].paragraphs == tuple(PAGES[1])


def test_pdf_outline_entries_start_sections_at_their_heading_line(tmp_path: Path) -> None:
    path = write_pdf(tmp_path, outline=[("Restart the worker", 0), ("Roll back", 1)])
    converted = convert_pdf(path)
    assert [(s.heading, s.paragraphs, s.pages) for s in converted.sections] == [
        ("Restart the worker", (PAGES[0][1],), (1,)),
        ("Roll back", (PAGES[1][1], PAGES[2][0]), (2, 3)),
    ]
    # Without metadata the first outline entry is the title.
    assert (converted.title, converted.title_from) == ("Restart the worker", "PDF outline")


def test_pdf_lines_in_larger_type_start_sections_when_there_is_no_outline(
    tmp_path: Path,
) -> None:
    pages = [
        ["Worker runbook notes", "# Restart the worker", "Drain the queue first."],
        ["Stop the process after the drain.", "# Roll back", "Use the previous image tag."],
    ]
    converted = convert_pdf(write_pdf(tmp_path, pages=pages))
    assert [(s.heading, s.paragraphs, s.pages) for s in converted.sections] == [
        (None, ("Worker runbook notes",), (1,)),
        (
            "Restart the worker",
            ("Drain the queue first.", "Stop the process after the drain."),
            (1, 2),
        ),
        ("Roll back", ("Use the previous image tag.",), (2,)),
    ]


def test_pdf_outline_that_matches_no_text_is_ignored_for_pages(tmp_path: Path) -> None:
    path = write_pdf(tmp_path, outline=[("First", 0), ("Second", 1), ("Third", 2)])
    assert [s.heading for s in convert_pdf(path).sections] == ["Page 1", "Page 2", "Page 3"]


def test_a_password_protected_pdf_is_refused_as_such(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(make_pdf(PAGES))).pages:
        writer.add_page(page)
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    path = tmp_path / "locked.pdf"
    with path.open("wb") as handle:
        writer.write(handle)
    with pytest.raises(UnreadableSource) as caught:
        convert_pdf(path)
    assert caught.value.kind is UnreadableKind.PASSWORD_PROTECTED
    assert "password" in caught.value.reason


def test_a_pdf_of_pictures_only_is_refused_for_having_no_text_layer(tmp_path: Path) -> None:
    path = write_pdf(tmp_path, pages=[["x"], ["y"]], picture_pages=[0, 1])
    with pytest.raises(UnreadableSource) as caught:
        convert_pdf(path)
    assert caught.value.kind is UnreadableKind.NO_TEXT_LAYER
    assert "2 pages of pictures only" in caught.value.reason


def test_a_picture_page_inside_a_text_pdf_is_left_out_and_the_rest_read(tmp_path: Path) -> None:
    path = write_pdf(tmp_path, picture_pages=[1])
    converted = convert_pdf(path)
    assert [s.heading for s in converted.sections] == ["Page 1", "Page 3"]


def test_a_truncated_pdf_is_refused_as_corrupt(tmp_path: Path) -> None:
    whole = make_pdf(PAGES)
    path = tmp_path / "cut.pdf"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    with pytest.raises(UnreadableSource) as caught:
        convert_pdf(path)
    assert caught.value.kind is UnreadableKind.CORRUPT
    assert "truncated" in caught.value.reason


def test_a_file_that_is_not_a_pdf_is_refused_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "renamed.pdf"
    path.write_bytes(b"PK\x03\x04 not a pdf at all\n%%EOF\n")
    with pytest.raises(UnreadableSource) as caught:
        convert_pdf(path)
    assert caught.value.kind is UnreadableKind.CORRUPT


def test_a_pdf_whose_font_maps_text_to_private_use_is_refused_as_garbled(tmp_path: Path) -> None:
    path = write_pdf(tmp_path, private_use_font=True)
    with pytest.raises(UnreadableSource) as caught:
        convert_pdf(path)
    assert caught.value.kind is UnreadableKind.GARBLED


@pytest.mark.parametrize(
    ("text", "garbled"),
    [
        ("Drain the queue first, then stop the worker process.", False),
        ("Die Gruppe (G, ∘) ist abelsch, wenn für alle a, b ∈ G gilt: a∘b = b∘a.", False),
        ("Ein Raum mit ε > 0 und δ > 0 heißt stetig.", False),
        ("\ufffd\ufffd\ufffd \ufffd\ufffd queue \ufffd\ufffd\ufffd\ufffd", True),
        ("\ue000\ue001\ue002 \ue003\ue004\ue005 \ue006", True),
        ("ϲΒϴΒ\x03habibi ϲΒϴΒ\x03habibi word", True),
        ("!\"# $%& '()* +,-. /:;< =>?@ [\\]^ !\"# $%& '()* +,-. /:;<", True),
    ],
)
def test_garbled_text_is_told_from_text_with_symbols(text: str, garbled: bool) -> None:
    assert assess_text(text).garbled is garbled


# --- DOCX --------------------------------------------------------------------------------


def _png() -> bytes:
    """A 1×1 grey PNG."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
        + chunk(b"IEND", b"")
    )


def make_docx(path: Path, *, with_text: bool = True) -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = "Backup policy"
    if with_text:
        document.add_heading("Backup policy", level=1)
        document.add_paragraph("Backups run every night at 02:00.")
        document.add_heading("Retention", level=2)
        document.add_heading("Daily", level=4)
        document.add_paragraph("Daily backups are kept for 14 days.")
        document.add_paragraph("first item", style="List Bullet")
        document.add_paragraph("second item", style="List Bullet")
        table = document.add_table(rows=2, cols=2)
        for row, cells in zip(table.rows, [("Tier", "Days"), ("gold", "90")], strict=True):
            for cell, text in zip(row.cells, cells, strict=True):
                cell.text = text
        document.add_heading("Restore", level=2)
        document.add_paragraph("Ask the on-call engineer.")
    else:
        picture = io.BytesIO(_png())
        document.add_picture(picture)
    document.save(str(path))
    return path


def test_docx_headings_lists_and_tables_keep_their_structure(tmp_path: Path) -> None:
    converted = convert_docx(make_docx(tmp_path / "backup.docx"))
    assert (converted.title, converted.title_from) == ("Backup policy", "DOCX properties")
    assert [(s.heading, s.paragraphs) for s in converted.sections] == [
        ("Backup policy", ("Backups run every night at 02:00.",)),
        (
            "Retention",
            (
                "Daily\nDaily backups are kept for 14 days.",
                "- first item\n- second item",
                "Tier | Days\ngold | 90",
            ),
        ),
        ("Restore", ("Ask the on-call engineer.",)),
    ]


def test_a_word_file_with_only_a_picture_is_refused(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "scan.docx", with_text=False)
    with pytest.raises(UnreadableSource) as caught:
        convert_docx(path)
    assert caught.value.kind is UnreadableKind.NO_TEXT
    assert "1 picture" in caught.value.reason


def test_a_truncated_word_file_is_refused_as_corrupt(tmp_path: Path) -> None:
    whole = make_docx(tmp_path / "whole.docx").read_bytes()
    path = tmp_path / "cut.docx"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(UnreadableSource) as caught:
        convert_docx(path)
    assert caught.value.kind is UnreadableKind.CORRUPT


# --- HTML and text ---------------------------------------------------------------------

PAGE = """<!doctype html><html><head><title>Incident guide</title>
<style>body{color:red}</style><script>var tracking = 1;</script></head>
<body><header>Company wiki</header><nav><a href="/">Home</a> | <a href="/x">Other</a></nav>
<main><h1>Incident guide</h1><p>Page the <b>on-call</b> engineer first.</p>
<h2>Severity</h2><h4>Levels</h4><p>SEV1 is an outage.</p>
<table><tr><th>Level</th><th>Reply</th></tr><tr><td>SEV1</td><td>5 min</td></tr></table>
<ul><li>Open a channel</li><li>Post updates</li></ul>
<nav>Breadcrumbs</nav><script>var inline = 2;</script><footer>Was this page helpful?</footer>
<div role="navigation">Next page</div></main>
<aside>Related pages</aside><footer>Copyright 2026</footer></body></html>"""


def test_html_drops_boilerplate_and_keeps_headings_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "guide.html"
    path.write_text(PAGE, "utf-8")
    converted = convert_html(path)
    assert (converted.title, converted.title_from) == ("Incident guide", "<title>")
    assert [(s.heading, s.paragraphs) for s in converted.sections] == [
        ("Incident guide", ("Page the on-call engineer first.",)),
        (
            "Severity",
            (
                "Levels\nSEV1 is an outage.",
                "Level | Reply\nSEV1 | 5 min",
                "Open a channel",
                "Post updates",
            ),
        ),
    ]
    text = str(converted.sections)
    for boilerplate in (
        "Company wiki",
        "Home",
        "tracking",
        "color",
        "Related",
        "Copyright",
        "Next",
        "Breadcrumbs",
        "inline",
        "helpful",
    ):
        assert boilerplate not in text


def test_html_in_the_encoding_it_declares_is_read_and_undeclared_is_refused(
    tmp_path: Path,
) -> None:
    page = '<html><head><meta charset="windows-1252"><title>Café</title></head><body>'
    page += "<p>Grüße aus der Küche.</p></body></html>"
    declared = tmp_path / "old.html"
    declared.write_bytes(page.encode("cp1252"))
    converted = convert_html(declared)
    assert (converted.title, converted.sections[0].paragraphs) == (
        "Café",
        ("Grüße aus der Küche.",),
    )
    undeclared = tmp_path / "bare.html"
    undeclared.write_bytes(page.replace(' charset="windows-1252"', "").encode("cp1252"))
    with pytest.raises(UnreadableSource) as caught:
        convert_html(undeclared)
    assert caught.value.kind is UnreadableKind.CORRUPT


def test_text_takes_a_short_first_line_as_its_title(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("Disk alerts\n\nCheck df first.\nThen du.\n\nClean /tmp.\n", "utf-8")
    converted = convert_text(path)
    assert (converted.title, converted.title_from) == ("Disk alerts", "first line")
    assert converted.sections[0].paragraphs == ("Check df first.\nThen du.", "Clean /tmp.")


def test_text_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("Grüße\n\nText.".encode("latin-1"))
    with pytest.raises(UnreadableSource) as caught:
        convert_text(path)
    assert caught.value.kind is UnreadableKind.CORRUPT


# --- one file, any format ---------------------------------------------------------------


def test_load_file_gives_a_validated_document_with_pages_for_a_benchmark(tmp_path: Path) -> None:
    (document,) = load_file(write_pdf(tmp_path, title="Worker runbook"))
    assert (document.document_id, document.title, document.document_type) == (
        "runbook.pdf",
        "Worker runbook",
        "note",
    )
    assert [s.section_id for s in document.sections] == ["page-1", "page-2", "page-3"]
    assert document.sections[2].pages == (3,)


def test_a_first_heading_that_repeats_the_title_is_the_title_not_body_text(
    tmp_path: Path,
) -> None:
    # What pandoc renders from a Markdown note: <title> and <h1> both carry the title,
    # then the first section follows directly. Markdown and Word read that h1 as the
    # title; read as text it would join the first paragraph ("Fail over Fail over only").
    path = tmp_path / "failover.html"
    path.write_text(
        "<html><head><title>Fail over the database</title></head><body>"
        "<h1>Fail  over the Database</h1><h2>When</h2><p>Fail over only when the primary"
        " is lost.</p><h2>How</h2><p>Promote the replica.</p></body></html>",
        "utf-8",
    )
    (document,) = load_file(path)
    assert [(s.heading, s.paragraphs) for s in document.sections] == [
        ("When", ("Fail over only when the primary is lost.",)),
        ("How", ("Promote the replica.",)),
    ]
    # A first heading that is not the title still leads the next section's text.
    other = tmp_path / "other.html"
    other.write_text(
        "<html><head><title>Guide</title></head><body><h1>Part one</h1><h2>When</h2>"
        "<p>Now.</p></body></html>",
        "utf-8",
    )
    (document,) = load_file(other)
    assert document.sections[0].paragraphs == ("Part one\nNow.",)
