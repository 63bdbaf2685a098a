"""The conversion box: limits checked before and while a file is read, the conversion
process killed when its time passes, its memory runs out or its caller leaves, and its
reply trusted as data only."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from ragwright.adapters.formats import CONVERTERS
from ragwright.adapters.formats.box import convert
from ragwright.adapters.formats.converted import ConvertedDocument, ConvertedSection
from ragwright.adapters.formats.limits import MIB, ConversionLimits, check_inflated
from ragwright.errors import ConversionCancelled, UnreadableKind, UnreadableSource
from tests.adapters.formats.pdf_maker import make_pdf

LIMITS = ConversionLimits(seconds=30)


def write_docx(path: Path, paragraphs: list[str]) -> Path:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))
    return path


def docx_bomb(
    path: Path, inflated: int, *, declared: int | None = None, paragraphs: bool = False
) -> Path:
    """A Word file whose ``word/document.xml`` inflates to ``inflated`` bytes (blank
    space inside a paragraph, or with ``paragraphs`` one short paragraph repeated);
    ``declared`` makes its header lie about the size."""
    good = write_docx(path.with_suffix(".good.docx"), ["Hello"])
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(path, "w") as bomb:
        for member in source.infolist():
            if member.filename != "word/document.xml":
                bomb.writestr(member, source.read(member))
        head = b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        tail = b"</w:body></w:document>"
        paragraph = b"<w:p><w:r><w:t>Refunds take five days.</w:t></w:r></w:p>"
        if not paragraphs:
            head, tail = head + b"<w:p><w:r><w:t>", b"</w:t></w:r></w:p>" + tail
        squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
        crc = zlib.crc32(head)
        parts = [squeeze.compress(head)]
        block = paragraph * (MIB // len(paragraph)) if paragraphs else b" " * MIB
        left = inflated - len(head) - len(tail)
        while left > 0:
            piece = block[: min(left, len(block))]
            if paragraphs and len(piece) < len(block):
                piece = b" " * len(piece)  # the last few bytes: blank space between them
            crc = zlib.crc32(piece, crc)
            parts.append(squeeze.compress(piece))
            left -= len(piece)
        crc = zlib.crc32(tail, crc)
        parts += [squeeze.compress(tail), squeeze.flush()]
        data = b"".join(parts)
        info = zipfile.ZipInfo("word/document.xml")
        info.compress_type = zipfile.ZIP_DEFLATED
        # Written raw: the member's bytes as deflated above, its sizes as declared.
        info.CRC, info.compress_size, info.file_size = crc, len(data), declared or inflated
        with bomb._lock:
            bomb.fp.seek(bomb.start_dir)  # type: ignore[union-attr]
            info.header_offset = bomb.start_dir
            bomb.fp.write(info.FileHeader())  # type: ignore[union-attr]
            bomb.fp.write(data)  # type: ignore[union-attr]
            bomb.start_dir = bomb.fp.tell()  # type: ignore[union-attr]
            bomb.filelist.append(info)
            bomb.NameToInfo[info.filename] = info
            bomb._didModify = True
    good.unlink()
    return path


def refusal(error: pytest.ExceptionInfo[UnreadableSource]) -> tuple[UnreadableKind, str]:
    return error.value.kind, error.value.reason


def test_a_word_bomb_is_refused_by_its_declared_size_before_python_docx_reads_it(
    tmp_path: Path,
) -> None:
    bomb = docx_bomb(tmp_path / "bomb.docx", 80 * MIB)
    assert bomb.stat().st_size < MIB  # 80 MiB of XML in a small file
    with pytest.raises(UnreadableSource) as error:
        convert(bomb, CONVERTERS[".docx"], LIMITS)
    kind, reason = refusal(error)
    assert kind is UnreadableKind.OVER_LIMIT
    assert (
        "compressed parts declare 80.8 MiB" in reason and "RAGWRIGHT_CONVERT_MAX_INFLATED" in reason
    )


@pytest.mark.parametrize("inflated", [8 * MIB, 64 * 1024], ids=["too-compressed", "bad-checksum"])
def test_a_word_bomb_whose_header_claims_less_is_refused_before_python_docx_reads_it(
    tmp_path: Path, inflated: int
) -> None:
    # Its header says 1 KiB: zipfile's read() would inflate all of it before cutting it.
    bomb = docx_bomb(tmp_path / "liar.docx", inflated, declared=1024)
    limits = ConversionLimits(max_inflated_bytes=4 * MIB, seconds=30)
    with pytest.raises(UnreadableSource) as error:
        check_inflated(bomb, limits)
    assert refusal(error) == (
        UnreadableKind.CORRUPT,
        "its part 'word/document.xml' does not match its header (damaged, or a zip bomb): "
        "export it again",
    )


def test_the_inflated_limit_counts_every_part_of_the_file(tmp_path: Path) -> None:
    bomb = docx_bomb(tmp_path / "honest.docx", 3 * MIB)  # and python-docx's 0.8 MiB of parts
    with pytest.raises(UnreadableSource) as error:
        check_inflated(bomb, ConversionLimits(max_inflated_bytes=2 * MIB))
    assert "declare 3.8 MiB" in refusal(error)[1]
    check_inflated(bomb, ConversionLimits(max_inflated_bytes=4 * MIB))  # within: no refusal


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "note.txt"
    path.write_text("x" * 2000)
    read: list[Path] = []

    def reader(p: Path, limits: ConversionLimits) -> ConvertedDocument:
        read.append(p)
        return CONVERTERS[".txt"](p, limits)

    with pytest.raises(UnreadableSource) as error:
        convert(path, reader, ConversionLimits(max_bytes=1000))
    assert "RAGWRIGHT_CONVERT_MAX_BYTES" in refusal(error)[1]
    assert read == []


def test_a_pdf_with_more_pages_than_the_limit_is_refused_before_its_pages_are_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(make_pdf([["Page one"], ["Page two"], ["Page three"]]))
    with pytest.raises(UnreadableSource) as error:
        convert(path, CONVERTERS[".pdf"], ConversionLimits(max_pages=2, seconds=30))
    assert refusal(error) == (
        UnreadableKind.OVER_LIMIT,
        "3 pages, over the limit of 2 (RAGWRIGHT_CONVERT_MAX_PAGES): split the file, or raise "
        "the limit if it is trusted",
    )
    assert convert(path, CONVERTERS[".pdf"], ConversionLimits(max_pages=3, seconds=30))


def test_a_pdf_is_refused_at_the_page_where_its_text_passes_the_character_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wordy.pdf"
    line = "The worker drains queued jobs before it stops for the night."
    path.write_bytes(make_pdf([[line] * 4 for _ in range(4)]))
    with pytest.raises(UnreadableSource) as error:
        convert(path, CONVERTERS[".pdf"], ConversionLimits(max_characters=500, seconds=30))
    assert "more than 500 characters of text by page 3" in refusal(error)[1]


def spin(_path: Path, _limits: ConversionLimits) -> ConvertedDocument:
    while True:
        pass


def sleep_with_a_helper(path: Path, _limits: ConversionLimits) -> ConvertedDocument:
    helper = subprocess.Popen(["sleep", "300"])
    (path.parent / "helper.pid").write_text(str(helper.pid))
    (path.parent / "child.pid").write_text(str(os.getpid()))
    time.sleep(300)
    raise AssertionError("not reached")


def hog(_path: Path, _limits: ConversionLimits) -> ConvertedDocument:
    held = []
    while True:
        held.append(bytearray(16 * MIB))


def a_paper(tmp_path: Path) -> Path:
    path = tmp_path / "paper.pdf"
    path.write_bytes(b"%PDF-1.4\n%%EOF\n")
    return path


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie not yet reaped by its parent still answers: it holds no memory.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_a_conversion_past_its_time_is_killed_with_what_it_started(tmp_path: Path) -> None:
    path = a_paper(tmp_path)
    started = time.monotonic()
    with pytest.raises(UnreadableSource) as error:
        convert(path, sleep_with_a_helper, ConversionLimits(seconds=1.5))
    assert time.monotonic() - started < 20
    assert refusal(error)[1].startswith("converting it took more than 1.5 s, over the limit")
    assert "RAGWRIGHT_CONVERT_TIMEOUT" in refusal(error)[1]
    for name in ("child.pid", "helper.pid"):
        pid = int((tmp_path / name).read_text())
        for _ in range(100):
            if gone(pid):
                break
            time.sleep(0.05)
        assert gone(pid), name


def test_a_conversion_using_the_cpu_past_its_time_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnreadableSource) as error:
        convert(a_paper(tmp_path), spin, ConversionLimits(seconds=1))
    assert "RAGWRIGHT_CONVERT_TIMEOUT" in refusal(error)[1]


def test_a_conversion_past_its_memory_is_refused_and_the_parent_keeps_its_own(
    tmp_path: Path,
) -> None:
    with pytest.raises(UnreadableSource) as error:
        convert(a_paper(tmp_path), hog, ConversionLimits(memory_bytes=128 * MIB, seconds=30))
    assert refusal(error)[0] is UnreadableKind.OVER_LIMIT
    assert "needed more than 128 MiB of memory" in refusal(error)[1]
    assert "RAGWRIGHT_CONVERT_MAX_MEMORY" in refusal(error)[1]


def test_a_caller_going_away_stops_the_conversion_at_once(tmp_path: Path) -> None:
    from ragwright.cancelling import cancelled_by

    path = a_paper(tmp_path)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with cancelled_by(cancel), pytest.raises(ConversionCancelled):
        convert(path, sleep_with_a_helper, ConversionLimits(seconds=60))
    assert time.monotonic() - started < 10
    assert gone(int((tmp_path / "child.pid").read_text()))


def crash(_path: Path, _limits: ConversionLimits) -> ConvertedDocument:
    os.kill(os.getpid(), 11)
    raise AssertionError("not reached")


class Trojan:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("the parent ran this",))


def smuggle(_path: Path, _limits: ConversionLimits) -> ConvertedDocument:
    return ConvertedDocument("T", None, (ConvertedSection(None, (Trojan(),)),))  # type: ignore[arg-type]


def test_a_converter_that_crashes_refuses_the_file_as_corrupt(tmp_path: Path) -> None:
    with pytest.raises(UnreadableSource) as error:
        convert(a_paper(tmp_path), crash, LIMITS)
    assert refusal(error) == (
        UnreadableKind.CORRUPT,
        "its converter failed on it (signal 11); export it again",
    )


def test_a_reply_naming_anything_but_the_documents_classes_is_never_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UnreadableSource) as error:
        convert(a_paper(tmp_path), smuggle, LIMITS)
    assert refusal(error)[0] is UnreadableKind.CORRUPT
    assert "the parent ran this" not in capsys.readouterr().out


def record(path: Path, limits: ConversionLimits) -> ConvertedDocument:
    log = path.parent / "events.log"
    with log.open("a") as events:
        events.write(f"start {time.monotonic()}\n")
    time.sleep(0.3)
    with log.open("a") as events:
        events.write(f"end {time.monotonic()}\n")
    return ConvertedDocument("T", None, (ConvertedSection(None, ("text",)),))


def test_conversions_of_one_process_take_turns_in_its_slots(tmp_path: Path) -> None:
    limits = ConversionLimits(workers=1, seconds=30)
    paths = []
    for index in range(3):
        path = tmp_path / f"paper-{index}.pdf"
        path.write_bytes(b"%PDF-1.4\n%%EOF\n")
        paths.append(path)
    threads = [threading.Thread(target=convert, args=(p, record, limits)) for p in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    events = (tmp_path / "events.log").read_text().split()[::2]
    assert events == ["start", "end"] * 3  # never two at once


def test_a_small_text_file_converts_in_process_and_a_pdf_in_a_child(tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("Title\n\nBody")
    pids: list[int] = []

    def which(path: Path, limits: ConversionLimits) -> ConvertedDocument:
        pids.append(os.getpid())
        (path.parent / f"{path.name}.pid").write_text(str(os.getpid()))
        return CONVERTERS[".txt"](note, limits)

    convert(note, which, LIMITS)
    convert(a_paper(tmp_path), which, LIMITS)
    assert pids == [os.getpid()]  # the child's append happened in the child
    assert int((tmp_path / "paper.pdf.pid").read_text()) != os.getpid()


def killed_from_outside(_path: Path, _limits: ConversionLimits) -> ConvertedDocument:
    os.kill(os.getpid(), 9)  # as the system's OOM killer would
    raise AssertionError("not reached")


def test_a_conversion_killed_by_the_system_says_so_and_not_that_it_took_too_long(
    tmp_path: Path,
) -> None:
    with pytest.raises(UnreadableSource) as error:
        convert(a_paper(tmp_path), killed_from_outside, LIMITS)
    assert refusal(error)[0] is UnreadableKind.OVER_LIMIT
    assert refusal(error)[1].startswith("its conversion process was killed by the system")


def test_a_large_text_file_converts_in_the_box_whole(tmp_path: Path) -> None:
    # 12 MiB of text: more than the characters a PDF may give, still a text file's reply.
    path = tmp_path / "big.txt"
    path.write_text("Title\n\n" + ("Refunds take five days to appear. " * 30 + "\n\n") * 12_000)
    document = convert(path, CONVERTERS[".txt"], LIMITS)
    assert len(document.sections[0].paragraphs) == 12_000
