"""Hostile and broken uploads: every one a 4xx naming the file and its reason, never a
500; a Word bomb refused at the inflated limit; a client that leaves stops its file's
conversion process; upload folders never outlive their request or their server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ragwright.adapters.formats.limits import MIB
from ragwright.service.converting import UPLOAD_PREFIX, remove_orphans
from tests.adapters.formats.pdf_maker import make_pdf
from tests.adapters.formats.test_box import docx_bomb
from tests.service.conftest import LiveServer, Service, bearer

Client = Callable[[Service], TestClient]
FORM = {"document_type": "note", "publication_state": "published"}
LINE = "The worker drains queued jobs before it stops for the night. " * 3


def blank_pages(count: int) -> bytes:
    return make_pdf([[] for _ in range(count)])


@pytest.mark.parametrize(
    ("files", "field", "rule"),
    [
        ([("empty.txt", b"")], "files[empty.txt]", "holds no text"),
        ([("empty.html", b"")], "files[empty.html]", "holds no text"),
        (
            [("blank.html", b"<html><body><nav>menu</nav></body></html>")],
            "files[blank.html]",
            "holds no text",
        ),
        (
            [("x" * 300 + ".md", b"# T\n\nhello")],
            "files[0]",
            "each folder or file name at most 255",
        ),
        (
            [("a.md", b"# A\n\nhello"), ("a.md/b.md", b"# B\n\nworld")],
            "files[1]",
            "'a.md' is sent both as a file and as a folder",
        ),
        (
            [("a/b.md", b"# B\n\nworld"), ("a", b"plain")],
            "files[1]",
            "'a' is sent both as a file and as a folder",
        ),
        (
            [("long.pdf", blank_pages(20_000))],
            "files[long.pdf]",
            "20,000 pages, over the limit of 5,000 (RAGWRIGHT_CONVERT_MAX_PAGES)",
        ),
    ],
    ids=[
        "empty-txt",
        "empty-html",
        "no-main-text",
        "long-name",
        "file-then-folder",
        "folder-then-file",
        "20000-pages",
    ],
)
def test_a_broken_upload_is_a_4xx_naming_the_file_and_the_next_request_is_served(
    make_service: Callable[..., Service],
    client_for: Client,
    files: list[tuple[str, bytes]],
    field: str,
    rule: str,
) -> None:
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest", "search"))
    client = client_for(service)
    response = client.post(
        "/v1/ingestions/files",
        files=[("files", item) for item in files],
        data=FORM,
        headers=bearer(writer),
    )
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == field
    assert rule in error["rule"]
    assert client.get("/healthz").status_code == 200


def test_a_word_bomb_is_refused_at_the_inflated_limit_and_nothing_is_written(
    make_service: Callable[..., Service], client_for: Client, tmp_path: Path
) -> None:
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest", "search"))
    client = client_for(service)
    bomb = docx_bomb(tmp_path / "bomb.docx", 100 * MIB).read_bytes()
    response = client.post(
        "/v1/ingestions/files",
        files=[("files", ("policy.docx", bomb)), ("files", ("note.md", b"# Note\n\nKept out."))],
        data=FORM,
        headers=bearer(writer),
    )
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == "files[policy.docx]"
    assert "over the limit of 64.0 MiB (RAGWRIGHT_CONVERT_MAX_INFLATED)" in error["rule"]
    skipped = client.post(
        "/v1/ingestions/files",
        files=[("files", ("policy.docx", bomb)), ("files", ("note.md", b"# Note\n\nKept."))],
        data={**FORM, "skip_invalid": "true"},
        headers=bearer(writer),
    )
    assert skipped.status_code == 200, skipped.text
    assert [s["kind"] for s in skipped.json()["skipped_files"]] == ["over_limit"]


def conversion_children() -> set[int]:
    """This process's children that lead a session of their own (conversion processes)."""
    found = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:  # a thread or a process may end while it is looked at
            for pid in (task / "children").read_text().split():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z" and int(fields[3]) == int(pid):  # its session: itself
                    found.add(int(pid))
        except FileNotFoundError:
            continue
    return found


def upload_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"{UPLOAD_PREFIX}{os.getpid()}-*")}


def test_a_client_that_leaves_stops_its_files_conversion_and_its_folder_goes(
    make_service: Callable[..., Service],
) -> None:
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest",))
    pdf = make_pdf([[LINE] * 30 for _ in range(250)])  # converts for seconds
    body = httpx.Request(
        "POST",
        "http://x/v1/ingestions/files",
        files=[("files", ("long.pdf", pdf))],
        data=FORM,
        headers=bearer(writer),
    )
    before = upload_folders()
    with LiveServer(service.app) as url:
        raw = body.read()
        head = "".join(f"{k}: {v}\r\n" for k, v in body.headers.items() if k.lower() != "host")
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as sock:
            sock.sendall(
                f"POST /v1/ingestions/files HTTP/1.1\r\nhost: x\r\n{head}\r\n".encode() + raw
            )
            for _ in range(600):
                running = conversion_children()
                if running:
                    break
                time.sleep(0.05)
            assert running, "the conversion never started"
            assert upload_folders() - before
        # The client has gone: within the disconnect poll and the box's poll (0.3 s) it
        # is killed, long before the file's 250 pages (about 6 s here) are read.
        left = time.monotonic()
        while conversion_children() & running and time.monotonic() - left < 30:
            time.sleep(0.05)
        assert time.monotonic() - left < 3
        for _ in range(100):
            if not upload_folders() - before:
                break
            time.sleep(0.05)
        assert not upload_folders() - before
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200


def test_upload_folders_of_a_killed_server_are_removed_at_the_next_start(
    make_service: Callable[..., Service], client_for: Client
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    orphan = Path(tempfile.mkdtemp(prefix=f"{UPLOAD_PREFIX}{dead.pid}-"))
    (orphan / "secret.pdf").write_bytes(b"left behind")
    mine = Path(tempfile.mkdtemp(prefix=f"{UPLOAD_PREFIX}{os.getpid()}-"))
    try:
        client_for(make_service(ingest=False))  # starting the service (its lifespan)
        assert not orphan.exists()
        assert mine.exists()  # a live process's folder is left alone
        assert remove_orphans() == 0
    finally:
        mine.rmdir()


@pytest.mark.parametrize("workers", [1, 2])
def test_uploads_at_once_take_turns_in_the_conversion_slots(
    make_service: Callable[..., Service], workers: int
) -> None:
    service = make_service(ingest=False, convert_workers=workers)
    writer = service.key("writer", scopes=("ingest",))
    pdf = make_pdf([[LINE] * 30 for _ in range(80)])  # converts for about 2 s
    most = 0
    with LiveServer(service.app) as url:

        def send(name: str) -> None:
            httpx.post(
                f"{url}/v1/ingestions/files",
                files=[("files", (name, pdf))],
                data=FORM,
                headers=bearer(writer),
                timeout=120,
            )

        senders = [threading.Thread(target=send, args=(f"f{i}.pdf",)) for i in range(3)]
        for sender in senders:
            sender.start()
        while any(sender.is_alive() for sender in senders):
            most = max(most, len(conversion_children()))
            time.sleep(0.02)
        for sender in senders:
            sender.join(120)
    assert most == workers


@pytest.mark.parametrize(
    ("files", "form", "field", "rule"),
    [
        ([("a.exe", b"MZ")], FORM, "files", "no document files"),
        (
            [("note.md", b"---\npublication_sate: draft\n---\n# Title\n\nBody")],
            {},
            "files[note.md]",
            "did you mean 'publication_state'",
        ),
    ],
    ids=["no-document-file", "front-matter-typo"],
)
def test_a_refusal_names_what_was_sent_never_the_servers_folder(
    make_service: Callable[..., Service],
    client_for: Client,
    files: list[tuple[str, bytes]],
    form: dict[str, str],
    field: str,
    rule: str,
) -> None:
    service = make_service(ingest=False)
    writer = service.key("writer", scopes=("ingest",))
    response = client_for(service).post(
        "/v1/ingestions/files",
        files=[("files", item) for item in files],
        data=form,
        headers=bearer(writer),
    )
    assert response.status_code == 422, response.text
    assert UPLOAD_PREFIX not in response.text and tempfile.gettempdir() not in response.text
    (error,) = response.json()["errors"]
    assert error["field"] == field
    assert rule in error["rule"]
