"""Folders of mixed formats: metadata and where it came from, rules, every problem at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragwright.adapters.sources import SourceDefaults, SourceStream, load_sources
from ragwright.errors import SourceError, UnreadableKind, UnreadableSource
from ragwright.types import DocumentOrigin
from tests.adapters.formats.pdf_maker import make_pdf
from tests.adapters.formats.test_converters import PAGE, PAGES, make_docx

DEFAULTS = SourceDefaults(document_type="note", publication_state="published")


def mixed_folder(root: Path) -> Path:
    folder = root / "team"
    (folder / "guides").mkdir(parents=True)
    (folder / "notes.md").write_text("# Disk alerts\n\nCheck df first.\n", "utf-8")
    (folder / "todo.txt").write_text("Rotate the keys on Monday.\n", "utf-8")
    (folder / "guides" / "incident.html").write_text(PAGE, "utf-8")
    make_docx(folder / "guides" / "backup.docx")
    (folder / "guides" / "runbook.pdf").write_bytes(make_pdf(PAGES, title="Worker runbook"))
    (folder / "logo.png").write_bytes(b"\x89PNG")
    return folder


def origins_of(paths: list[Path], defaults: SourceDefaults = DEFAULTS) -> list[DocumentOrigin]:
    found: list[DocumentOrigin] = []
    load_sources(paths, defaults, origins=found.append)
    return found


def test_a_mixed_folder_loads_every_format_with_ids_from_paths(tmp_path: Path) -> None:
    folder = mixed_folder(tmp_path)
    left_out: list[tuple[str, str, str]] = []
    documents = load_sources([folder], DEFAULTS, skipped=lambda *item: left_out.append(item))
    assert [(d.document_id, d.title) for d in documents] == [
        ("guides/backup.docx", "Backup policy"),
        ("guides/incident.html", "Incident guide"),
        ("guides/runbook.pdf", "Worker runbook"),
        ("notes", "Disk alerts"),
        ("todo.txt", "todo"),
    ]
    assert left_out == [
        (
            str(folder / "logo.png"),
            "unsupported file type '.png' (read: .md, .txt, .html, .htm, .docx, .pdf, .json, "
            ".jsonl)",
            "unsupported_type",
        )
    ]


def test_ids_do_not_depend_on_where_the_folder_is(tmp_path: Path) -> None:
    here = mixed_folder(tmp_path / "a")
    there = tmp_path / "elsewhere" / "copy"
    shutil.copytree(here, there)
    ids = [d.document_id for d in load_sources([here], DEFAULTS)]
    assert ids == [d.document_id for d in load_sources([there], DEFAULTS)]


def test_origins_say_where_each_field_came_from(tmp_path: Path) -> None:
    folder = mixed_folder(tmp_path)
    (folder / "notes.md").write_text("---\ntenant: acme\n---\n# Disk alerts\n\nText.\n", "utf-8")
    (folder / "ragwright-sources.toml").write_text(
        '[[rules]]\nglob = "guides/*"\ndocument_type = "runbook"\n'
        '[[rules]]\nglob = "*.md"\ndocument_type = "runbook"\npublication_state = "draft"\n',
        "utf-8",
    )
    rules = folder / "ragwright-sources.toml"
    by_id = {o.document_id: o for o in origins_of([folder])}
    pdf = by_id["guides/runbook.pdf"]
    assert (pdf.id_from, pdf.title_from, pdf.document_type, pdf.type_from) == (
        "path",
        "PDF metadata",
        "runbook",
        f"rule 'guides/*' in {rules}",
    )
    assert (pdf.publication_state, pdf.state_from, pdf.tenant, pdf.tenant_from) == (
        "published",
        "--state",
        None,
        "none",
    )
    notes = by_id["notes"]
    assert (notes.type_from, notes.state_from, notes.tenant, notes.tenant_from) == (
        f"rule '*.md' in {rules}",
        f"rule '*.md' in {rules}",
        "acme",
        "front matter",
    )
    assert (by_id["todo.txt"].title_from, by_id["todo.txt"].type_from) == ("file name", "--type")
    assert by_id["guides/incident.html"].title_from == "<title>"


def test_front_matter_beats_a_rule_which_beats_the_command_line(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a.md").write_text("---\ndocument_type: note\n---\n# A\n\nText.\n", "utf-8")
    (folder / "b.md").write_text("# B\n\nText.\n", "utf-8")
    (folder / "ragwright-sources.toml").write_text(
        '[[rules]]\nglob = "*"\ndocument_type = "runbook"\n', "utf-8"
    )
    defaults = SourceDefaults(document_type="note", publication_state="published")
    types = {d.document_id: d.document_type for d in load_sources([folder], defaults)}
    assert types == {"a": "note", "b": "runbook"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[[rules]]\nglob = "*"\ntype = "note"\n', "rules[0]: unknown keys ['type']"),
        ('[[rules]]\ndocument_type = "note"\n', "rules[0]: needs a glob"),
        ('[[rules]]\nglob = "*"\ntenant = 3\n', "rules[0].tenant: must be a non-blank string"),
        ("[[rules]\n", "not a readable rules file"),
    ],
)
def test_a_bad_rules_file_is_refused_naming_the_rule(
    tmp_path: Path, text: str, fragment: str
) -> None:
    folder = mixed_folder(tmp_path)
    (folder / "ragwright-sources.toml").write_text(text, "utf-8")
    with pytest.raises(SourceError) as caught:
        load_sources([folder], DEFAULTS)
    assert caught.value.source == str(folder / "ragwright-sources.toml")
    assert fragment in caught.value.reason


def test_files_with_no_metadata_take_the_default_type_and_state_and_say_so(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.md").write_text(f"# Note {name}\n\nText {name}.\n", "utf-8")
    stream = SourceStream([folder], SourceDefaults(publication_state="draft"))
    documents = list(stream)
    assert {(d.document_type, d.publication_state) for d in documents} == {("runbook", "draft")}
    assert {(o.type_from, o.state_from) for o in stream.origins} == {("default", "--state")}


def unreadable_folder(root: Path) -> Path:
    folder = mixed_folder(root)
    whole = make_pdf(PAGES)
    (folder / "cut.pdf").write_bytes(whole[: len(whole) // 2])
    (folder / "scan.pdf").write_bytes(make_pdf([["x"]], picture_pages=[0]))
    make_docx(folder / "picture.docx", with_text=False)
    return folder


def test_unreadable_files_of_a_folder_are_left_out_and_listed_without_any_flag(
    tmp_path: Path,
) -> None:
    folder = unreadable_folder(tmp_path)
    stream = SourceStream([folder], DEFAULTS)
    ids = [d.document_id for d in stream]
    assert "guides/runbook.pdf" in ids and len(ids) == 5
    named = {Path(path).name: reason for path, reason, _ in stream.skipped}
    assert named["cut.pdf"].startswith("truncated")
    assert named["scan.pdf"].startswith("no text layer")
    assert named["picture.docx"].startswith("holds no text")


def test_skip_invalid_leaves_unreadable_files_out_naming_each_with_its_kind(
    tmp_path: Path,
) -> None:
    folder = unreadable_folder(tmp_path)
    stream = SourceStream([folder], DEFAULTS, skip_invalid=True)
    ids = [d.document_id for d in stream]
    assert "cut.pdf" not in ids and "guides/runbook.pdf" in ids and len(ids) == 5
    kinds = {Path(path).name: kind for path, _, kind in stream.skipped}
    assert kinds == {
        "cut.pdf": UnreadableKind.CORRUPT,
        "picture.docx": UnreadableKind.NO_TEXT,
        "scan.pdf": UnreadableKind.NO_TEXT_LAYER,
        "logo.png": "unsupported_type",
    }
    assert [o.document_id for o in stream.origins] == ids


def test_one_unreadable_file_given_by_name_is_its_own_typed_error(tmp_path: Path) -> None:
    folder = mixed_folder(tmp_path)
    (folder / "scan.pdf").write_bytes(make_pdf([["x"]], picture_pages=[0]))
    with pytest.raises(UnreadableSource) as caught:
        load_sources([folder / "scan.pdf"], DEFAULTS)
    assert caught.value.kind is UnreadableKind.NO_TEXT_LAYER
    assert caught.value.source == str(folder / "scan.pdf")
