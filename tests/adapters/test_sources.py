from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragwright.adapters.sources import (
    SkippedDocument,
    SourceDefaults,
    SourceStream,
    load_json,
    load_markdown,
    load_sources,
)
from ragwright.core.chunking import build_chunks
from ragwright.core.points import lexical_text, plan_document
from ragwright.errors import (
    DocumentError,
    RagwrightError,
    SourceError,
    UnreadableKind,
    UnreadableSource,
)
from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import ChunkingPolicy
from tests.conftest import SAMPLES, shared_data

DEFAULTS = SourceDefaults(document_type="runbook", publication_state="published")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def test_markdown_sections_blocks_and_front_matter(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "svc.md",
        "---\ndocument_id: svc\npublication_state: draft\ntenant: acme\n---\n"
        "# Restart the service\n\nIntro text.\n\n"
        "## Diagnosis\n\nFirst paragraph\nwraps here.\n\n### Logs\n\nCheck the logs.\n\n"
        "```bash\necho one\n\necho two\n```\n\n- item one\n\n- item two\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "## Diagnosis\n\nSecond section with the same heading.\n",
    )
    doc = load_markdown(path, DEFAULTS, document_id="fallback")
    assert (doc.document_id, doc.title, doc.publication_state, doc.document_type, doc.tenant) == (
        "svc",
        "Restart the service",
        "draft",
        "runbook",
        "acme",
    )
    assert [s.section_id for s in doc.sections] == ["intro", "diagnosis", "diagnosis-2"]
    assert doc.sections[0].heading == "Restart the service"
    assert doc.sections[1].paragraphs == (
        "First paragraph\nwraps here.",
        "### Logs\nCheck the logs.",
        "```bash\necho one\n\necho two\n```",
        "- item one\n\n- item two",
        "| a | b |\n|---|---|\n| 1 | 2 |",
    )


def test_section_ids_are_stable_slugs(tmp_path: Path) -> None:
    path = write(tmp_path, "a.md", "# T\n\n## Queue capacity & limits!\n\nText.\n")
    assert load_markdown(path, DEFAULTS).sections[0].section_id == "queue-capacity-limits"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "holds no text"),
        ("---\ntitle: [unclosed\n---\n# T\n\nx\n", "not valid YAML"),
        ("---\npublication_sate: draft\n---\n# T\n\nx\n", "did you mean 'publication_state'"),
        ("---\ntenat: acme\nsort_rank: 2\n---\n# T\n\nx\n", "did you mean 'tenant'"),
        ("---\ntitle: T\n# T\n", "never closes"),
    ],
)
def test_markdown_problems_are_source_errors_with_reasons(
    tmp_path: Path, text: str, fragment: str
) -> None:
    with pytest.raises(SourceError) as caught:
        load_markdown(write(tmp_path, "bad.md", text), DEFAULTS)
    assert fragment in str(caught.value)
    assert "bad.md" in str(caught.value)


def test_invalid_front_matter_yaml_is_one_line_at_its_line_of_the_file(tmp_path: Path) -> None:
    text = "---\ntitle: T\ndocument_type: [runbook\n---\n# T\n\nx\n"
    with pytest.raises(SourceError) as caught:
        load_markdown(write(tmp_path, "bad.md", text), DEFAULTS)
    message = str(caught.value)
    assert "\n" not in message, message
    assert "not valid YAML" in message and "(line 4, column 1)" in message, message


def test_an_empty_section_becomes_the_first_line_of_the_next(tmp_path: Path) -> None:
    doc = load_markdown(write(tmp_path, "e.md", "# T\n\n## Empty\n\n## Full\n\nText.\n"), DEFAULTS)
    assert [(s.section_id, s.heading, s.paragraphs) for s in doc.sections] == [
        ("full", "Full", ("Empty\nText.",))
    ]


def test_markdown_without_a_title_is_named_after_its_file(tmp_path: Path) -> None:
    doc = load_markdown(write(tmp_path, "upgrade-notes.md", "## Steps\n\nText.\n"), DEFAULTS)
    assert (doc.title, [s.section_id for s in doc.sections]) == ("upgrade-notes", ["steps"])


def test_another_tools_front_matter_keys_are_ignored(tmp_path: Path) -> None:
    text = "---\ntitle: Alerting\nsort_rank: 7\nnav_icon: bell\nauthor: [a, b]\n---\n\nText.\n"
    doc = load_markdown(write(tmp_path, "index.md", text), DEFAULTS)
    assert (doc.title, doc.sections[0].paragraphs) == ("Alerting", ("Text.",))


def test_markdown_with_only_front_matter_is_a_file_with_no_text(tmp_path: Path) -> None:
    with pytest.raises(UnreadableSource) as caught:
        load_markdown(write(tmp_path, "index.md", "---\ntitle: Alerting\n---\n"), DEFAULTS)
    assert (caught.value.kind, caught.value.reason) == (
        UnreadableKind.NO_TEXT,
        "holds no text, only front matter",
    )


def test_missing_metadata_takes_the_defaults_the_first_ask_searches(tmp_path: Path) -> None:
    document = load_markdown(write(tmp_path, "m.md", "# T\n\nText.\n"), SourceDefaults())
    assert (document.document_type, document.publication_state) == ("runbook", "published")


def test_json_that_is_not_in_the_document_shape_is_left_out_of_a_folder(tmp_path: Path) -> None:
    write(tmp_path, "files.json", json.dumps([{"path": "a.pdf", "producer": "pdfTeX"}]))
    write(tmp_path, "a.md", "# A\n\nText.\n")
    stream = SourceStream([tmp_path], SourceDefaults())
    assert [d.document_id for d in stream] == ["a"]
    ((path, reason, kind),) = stream.skipped
    assert (Path(path).name, kind) == ("files.json", "not_documents")
    assert "document_id" in reason
    with pytest.raises(SourceError, match="document shape"):  # named: a problem
        load_sources([tmp_path / "files.json"], SourceDefaults())


def test_json_in_the_seed_shape_with_camel_case(tmp_path: Path) -> None:
    doc = {
        "documentId": "worker-shutdown",
        "title": "Stop a worker",
        "documentType": "runbook",
        "publicationState": "published",
        "sections": [
            {"sectionId": "shutdown", "heading": "Shutdown", "paragraphs": ["One.", "Two."]}
        ],
    }
    write(tmp_path, "docs.json", json.dumps({"documents": [doc]}))
    (loaded,) = load_sources([tmp_path], SourceDefaults())
    assert loaded.sections[0].paragraphs == ("One.", "Two.")


def test_json_unknown_field_is_named(tmp_path: Path) -> None:
    write(
        tmp_path,
        "docs.json",
        json.dumps([{"document_id": "d", "title": "T", "sections": [], "colour": 1}]),
    )
    with pytest.raises(SourceError) as caught:
        load_sources([tmp_path], DEFAULTS)
    assert "colour" in str(caught.value)


def test_beir_corpus_lines_become_documents(tmp_path: Path) -> None:
    rows = [
        {"_id": "1", "title": "A title", "text": "Para one.\n\nPara two."},
        {"_id": "2", "title": "", "text": "x"},
    ]
    write(tmp_path, "corpus.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    docs = load_sources([tmp_path / "corpus.jsonl"], SourceDefaults("note", "published"))
    assert [d.document_id for d in docs] == ["1", "2"]
    assert docs[0].sections[0].paragraphs == ("Para one.", "Para two.")
    assert docs[1].title == ""  # missing stays missing, never the id


BEIR_ROWS = [
    {"_id": "1", "title": "Kept", "text": "Para one."},
    {"_id": "471", "title": "Empty", "text": "  \n\n "},
    {"_id": "2", "title": "", "text": "Untitled text."},
    {"_id": "", "title": "No id", "text": "x"},
]


def test_one_empty_beir_document_fails_the_load_by_default(tmp_path: Path) -> None:
    write(tmp_path, "corpus.jsonl", "\n".join(json.dumps(r) for r in BEIR_ROWS) + "\n")
    with pytest.raises(DocumentError) as caught:
        load_sources([tmp_path / "corpus.jsonl"], SourceDefaults("note", "published"))
    assert (caught.value.document_id, caught.value.field) == ("471", "sections[0].paragraphs")


def test_invalid_beir_documents_can_be_skipped_and_each_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "corpus.jsonl", "\n".join(json.dumps(r) for r in BEIR_ROWS) + "\n")
    skipped: list[SkippedDocument] = []
    docs = load_sources(
        [tmp_path / "corpus.jsonl"], SourceDefaults("note", "published"), on_invalid=skipped.append
    )
    assert [d.document_id for d in docs] == ["1", "2"]
    where = str(tmp_path / "corpus.jsonl")
    assert skipped == [
        SkippedDocument(
            "471", f"{where}:2", "sections[0].paragraphs", "section 'text' has no paragraphs"
        ),
        SkippedDocument("", f"{where}:4", "document_id", "must not be blank"),
    ]


def test_skipping_never_applies_to_authored_sources_or_to_the_defaults(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\ndocument_id: ' '\n---\n# Title\n\nText.\n")
    with pytest.raises(DocumentError):
        load_sources([tmp_path / "a.md"], DEFAULTS, on_invalid=lambda s: None)
    write(tmp_path, "corpus.jsonl", json.dumps(BEIR_ROWS[0]) + "\n")
    (beir,) = load_sources([tmp_path / "corpus.jsonl"], SourceDefaults(), on_invalid=print)
    assert (beir.document_type, beir.publication_state) == ("runbook", "published")


def test_a_beir_document_without_title_has_no_invented_title_in_its_chunks(
    tmp_path: Path,
) -> None:
    write(tmp_path, "corpus.jsonl", json.dumps({"_id": "d7", "title": " ", "text": "Body."}))
    (document,) = load_sources([tmp_path / "corpus.jsonl"], SourceDefaults("note", "published"))
    (chunk,) = build_chunks(document, ChunkingPolicy())
    assert (document.title, chunk.heading, chunk.text) == ("", "", "Body.")
    (point,) = plan_document(document, [chunk], HASHING_PROFILE).points
    assert "d7" not in point.embedding_input and "d7" not in point.lexical_text
    assert lexical_text(document.title, chunk.heading, chunk.text) == "Body."


def test_beir_bad_line_names_the_line(tmp_path: Path) -> None:
    write(tmp_path, "corpus.jsonl", '{"_id": "1", "title": "t", "text": "x"}\n{"title": "no id"}\n')
    with pytest.raises(SourceError) as caught:
        load_sources([tmp_path / "corpus.jsonl"], SourceDefaults("note", "published"))
    assert caught.value.source.endswith("corpus.jsonl:2")


def test_duplicate_ids_across_files_are_rejected(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\ndocument_id: same\n---\n# A\n\nx\n")
    write(tmp_path, "b.md", "---\ndocument_id: same\n---\n# B\n\ny\n")
    with pytest.raises(DocumentError) as caught:
        load_sources([tmp_path], DEFAULTS)
    assert caught.value.document_id == "same"
    # Both files named: the repeat's, and the earlier one's (found by reading again).
    assert str(caught.value).startswith(str(tmp_path / "b.md"))
    assert f"(also in {tmp_path / 'a.md'})" in str(caught.value)


def test_missing_path_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        load_sources([tmp_path / "nope"], DEFAULTS)


def test_sample_corpus_loads_and_chunks_under_the_seed_policy() -> None:
    docs = {d.document_id: d for d in load_sources([SAMPLES])}
    assert 8 <= len(docs) <= 15
    assert docs["worker-shutdown"].publication_state == "published"
    assert docs["worker-shutdown-draft"].publication_state == "draft"
    assert docs["worker-shutdown-draft"].sections == docs["worker-shutdown"].sections
    assert docs["queue-capacity-note"].document_type == "note"
    chunks = build_chunks(docs["worker-shutdown"], ChunkingPolicy())
    # The deadline condition (paragraph 1) is repeated by the overlapping windows.
    shutdown = [c for c in chunks if c.section_id == "shutdown-and-the-queue"]
    assert [c.positions.paragraph_indexes for c in shutdown] == [(0, 1), (1, 2)]
    assert all("only while the shutdown deadline allows" in c.text for c in shutdown)


def _normalised(text: str) -> str:
    return "\n".join(line.strip() for line in text.split("\n"))


@pytest.mark.shared_data
def test_every_openshift_runbook_loads_and_no_code_fence_is_split() -> None:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable("table")
    root = shared_data("runbooks", "openshift", "alerts")
    files = sorted(root.rglob("*.md"))
    assert len(files) >= 270
    failures: dict[str, str] = {}
    fences_checked = 0
    for path in files:
        try:
            document = load_markdown(
                path, DEFAULTS, document_id=path.relative_to(root).with_suffix("").as_posix()
            )
        except RagwrightError as error:
            failures[path.name] = str(error)
            continue
        source = path.read_text("utf-8")
        lines = source.split("\n")
        blocks = [_normalised(b) for s in document.sections for b in s.paragraphs]
        for token in parser.parse(source):
            if token.type != "fence" or token.map is None:
                continue
            fence = _normalised("\n".join(lines[token.map[0] : token.map[1]]).strip())
            holders = [b for b in blocks if fence in b]
            assert holders, f"{path}: the fence at line {token.map[0] + 1} is split across blocks"
            fences_checked += 1
    assert fences_checked > 400
    # Every file loads; a failure would have to carry a reason naming the file.
    assert not failures, failures


def test_a_byte_order_mark_does_not_hide_the_title(tmp_path: Path) -> None:
    path = tmp_path / "bom.md"
    path.write_bytes("\ufeff# Restart the worker\n\n## Steps\n\nStop it first.\n".encode())
    document = load_markdown(path, DEFAULTS)
    assert document.title == "Restart the worker"
    assert [s.section_id for s in document.sections] == ["steps"]


def test_a_byte_order_mark_is_accepted_in_json(tmp_path: Path) -> None:
    seed = {
        "document_id": "bom",
        "title": "With a mark",
        "sections": [{"section_id": "s", "heading": "H", "paragraphs": ["Text."]}],
    }
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(seed).encode())
    assert [d.title for d in load_json(path, DEFAULTS)] == ["With a mark"]


def test_a_directory_without_documents_is_a_source_error(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.png", "README.md"):
        (folder / name).write_text("x", "utf-8")
    skipped: list[str] = []
    with pytest.raises(SourceError) as raised:
        load_sources([folder], DEFAULTS, skipped=lambda path, _reason, _kind: skipped.append(path))
    assert raised.value.source == str(folder)
    assert raised.value.reason == (
        "no document files (.md, .txt, .html, .htm, .docx, .pdf, .json, .jsonl) in this "
        "directory; 2 other files left out"
    )
    assert len(skipped) == 2


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    write(folder, "b.md", "# B\n\nBody b.\n")
    write(folder, "a.md", "# A\n\nBody a.\n")
    write(folder, "logo.png", "not a document")
    beir = [{"_id": "c1", "title": "C", "text": "Body c."}, {"_id": "c2", "title": "", "text": ""}]
    write(folder, "corpus.jsonl", "\n".join(json.dumps(row) for row in beir))
    return folder


def test_a_source_stream_yields_what_load_sources_returns_on_every_pass(tmp_path: Path) -> None:
    folder = _corpus(tmp_path)
    stream = SourceStream([folder], DEFAULTS, skip_invalid=True)
    loaded = load_sources([folder], DEFAULTS, on_invalid=lambda _skipped: None)
    assert [d.document_id for d in loaded] == ["a", "b", "c1"]  # files sorted: a, b, corpus
    assert list(stream) == loaded
    assert list(stream) == loaded
    # Rebuilt by each pass, not accumulated across the two.
    assert [path for path, _, _ in stream.skipped] == [str(folder / "logo.png")]
    assert [(s.document_id, s.field) for s in stream.invalid] == [("c2", "sections[0].paragraphs")]


def test_a_source_stream_reads_one_file_at_a_time(tmp_path: Path) -> None:
    # A later broken file is only read when the pass reaches it: nothing is read ahead.
    folder = _corpus(tmp_path)
    write(folder, "z.md", "---\ntenat: acme\n---\n# Z\n\nBody.\n")
    documents = iter(SourceStream([folder], DEFAULTS))
    assert [next(documents).document_id for _ in range(3)] == ["a", "b", "c1"]
    with pytest.raises(SourceError, match="did you mean 'tenant'"):
        next(documents)


def test_a_source_stream_rejects_a_duplicate_id_when_it_reaches_it(tmp_path: Path) -> None:
    folder = _corpus(tmp_path)
    section = {"section_id": "s", "heading": "S", "paragraphs": ["Text."]}
    write(folder, "d.json", json.dumps({"document_id": "a", "title": "A", "sections": [section]}))
    with pytest.raises(DocumentError, match="duplicate document id"):
        list(SourceStream([folder], DEFAULTS, skip_invalid=True))
