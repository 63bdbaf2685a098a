"""Retrieval on PDF, DOCX and HTML copies vs the Markdown original (issue 22, item 6).

A quality check that can fail: the copies ``benchmarks/render_corpus.py`` renders with
pandoc and LibreOffice are each ingested into their own RAGWRIGHT_HOME with
``ragwright ingest``, the same questions are scored with ``ragwright eval run`` (the
project's evaluation path, document-level keys), and nDCG@10 of every copy is compared
with the Markdown copy's. The script exits 1 when a copy is more than ``--tolerance``
(0.03) below or above it.

Questions (deterministic, rebuilt from the data on every run):

- ``clapnq``: the 143 answerable ClapNQ questions with their gold passage ids (grade 2).
  Document ids come from the file path relative to the copy's root: the Markdown copy's
  without ``.md`` (ClapNQ's front matter ids equal its file stems), the other copies'
  with their extension (``<id>.pdf``), as the product names them; each copy's questions
  name its ids (``copy_id``), and top-ranked documents are compared without the extension.
- ``runbooks``: no labelled questions exist for the OpenShift runbooks, so two generated
  sets, each with the runbook itself as the only relevant document: ``meaning``, the
  first sentence of the runbook's ``## Meaning`` section (Markdown links reduced to their
  text, code spans and emphasis marks removed; runbooks without such a section, or whose
  sentence is under 4 words, get no question) and ``alert-name``, the file stem split at
  its camel-case boundaries (``KubePodCrashLooping`` → "Kube Pod Crash Looping"). When
  several runbooks yield the same question, all of them are relevant to it. These
  questions quote the documents, so absolute nDCG is high; what the check compares is the
  copies against each other on identical questions.

Both corpora are chunked with ``sentence-blocks`` (runbooks 120 words, ClapNQ 400 words,
256 tokens), as ``benchmarks/ingest.py`` and ``benchmarks/answers.py`` chunk them.

Converters (``--converter``):

- ``product`` (the default): ``ragwright ingest`` reads the copies itself, with the
  converters of the checkout on ``--pythonpath`` (default this repository's ``src``).
- ``direct``: until the product reads PDF/DOCX/HTML, the benchmark converts each copy with
  the converters ``benchmarks/converters.py`` chose, through a small adapter in this file
  (``direct_document``), into the seeds' JSON document shape (title, sections of
  paragraphs) and ingests that JSON. Results say which path produced them. The adapter:
  PDF with pypdfium2 (outline entries found as lines become headings, else one section
  per page), DOCX with python-docx (``Heading N`` styles as headings, tables row by row),
  HTML with BeautifulSoup (``script``/``style``/``nav``/``header``/``footer``/``aside``
  dropped; headings, paragraphs, lists, code and tables of ``<main>`` in order).

Besides nDCG@10 per copy and its difference to Markdown, the JSON reports, per copy,
the share of questions whose top-ranked document is the same as on the Markdown copy,
per-category figures, documents and chunks ingested and ingest/eval wall time.

    /work/bench-venv/bin/python benchmarks/rendered_quality.py \\
        [--corpus runbooks clapnq] [--formats md pdf docx html] [--converter product|direct] \\
        [--pythonpath DIR] [--ragwright-python PY] [--mode hybrid] [--tolerance 0.03]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RENDERED = ROOT / ".ragwright" / "rendered"
RESULTS = ROOT / "benchmarks" / "results"
FORMATS = ("md", "pdf", "docx", "html")
# ragwright leaves these out of a folder: they describe it (one runbook folder has a README).
NOT_DOCUMENTS = ("readme.md", "license.md")
SETTINGS: dict[str, dict[str, Any]] = {
    "runbooks": {"types": ["runbook"], "max_words": 120},
    "clapnq": {"types": ["note"], "max_words": 400},
    # Type and state from front matter (Markdown) and the copies' rules file, not --type.
    "samples": {"types": ["runbook", "note"], "max_words": 120, "own_metadata": True},
}
SAMPLE_CASES = ROOT / "samples" / "eval" / "cases.jsonl"


# ---------------------------------------------------------------- questions


def strip_front_matter(text: str) -> str:
    lines = text.lstrip("\ufeff").split("\n")
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() in ("---", "..."):
                return "\n".join(lines[index + 1 :])
    return text


def plain(markdown: str) -> str:
    """Inline Markdown reduced to its text."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", markdown)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*_]+", "", text)
    return " ".join(text.split())


def meaning_sentence(markdown: str) -> str | None:
    """The first sentence of the ``## Meaning`` section, or None."""
    body = strip_front_matter(markdown)
    match = re.search(r"^##\s+Meaning\s*$(.*?)(?=^##\s|\Z)", body, flags=re.M | re.S)
    if match is None:
        return None
    section = re.sub(r"^(```|~~~).*?^\1[ \t]*$", "", match.group(1), flags=re.M | re.S)
    for block in re.split(r"\n\s*\n", section):
        stripped = block.strip()
        if not stripped or stripped.startswith(("#", "|", "<", ">", "```", "~~~")):
            continue
        sentence = re.split(r"(?<=[.!?])\s+", plain(stripped), maxsplit=1)[0]
        return sentence if len(sentence.split()) >= 4 else None
    return None


def split_camel(stem: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", stem)


def runbook_cases(md_root: Path) -> list[dict[str, Any]]:
    """Generated questions: ``meaning`` and ``alert-name`` sets, the runbook as gold."""
    by_question: dict[tuple[str, str], list[str]] = {}
    for path in sorted(md_root.rglob("*.md"), key=lambda p: p.relative_to(md_root).as_posix()):
        document_id = path.relative_to(md_root).with_suffix("").as_posix()
        sentence = meaning_sentence(path.read_text("utf-8-sig"))
        if sentence:
            by_question.setdefault(("meaning", sentence), []).append(document_id)
        by_question.setdefault(("alert-name", split_camel(path.stem)), []).append(document_id)
    cases = []
    for number, ((category, question), ids) in enumerate(by_question.items(), 1):
        cases.append(
            {
                "id": f"rb{number:04d}",
                "category": category,
                "question": question,
                "relevant": [{"document_id": i, "grade": 2} for i in sorted(set(ids))],
            }
        )
    return cases


def clapnq_cases() -> list[dict[str, Any]]:
    """ClapNQ's answerable questions with their gold passages (document level)."""
    cases = []
    with (DATA / "clapnq" / "questions.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            question = json.loads(line)
            if not question["answerable"]:
                continue
            cases.append(
                {
                    "id": question["id"],
                    "category": "answerable",
                    "question": question["question"],
                    "relevant": [
                        {"document_id": passage, "grade": 2}
                        for passage in question["gold_passage_ids"]
                    ],
                }
            )
    return cases


def sample_cases(path: Path = SAMPLE_CASES) -> list[dict[str, Any]]:
    """The samples' questions, all of them (the unsupported ones too, for the answers);
    relevant chunks reduced to their documents, each with its highest grade."""
    cases = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        grades: dict[str, int] = {}
        for key in case.get("relevant", []):
            grades[key["document_id"]] = max(grades.get(key["document_id"], 0), key["grade"])
        cases.append(
            {
                "id": case["id"],
                "category": case["category"],
                "question": case["question"],
                "relevant": [{"document_id": d, "grade": g} for d, g in sorted(grades.items())],
                "unsupported": bool(case.get("unsupported")),
            }
        )
    return cases


# ---------------------------------------------------------------- direct adapter


def _section_id(heading: str, used: dict[str, int]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or "section"
    used[base] = used.get(base, 0) + 1
    return base if used[base] == 1 else f"{base}-{used[base]}"


def _document(
    document_id: str, title: str, blocks: list[tuple[str, str]], corpus: str
) -> dict[str, Any]:
    """Blocks of (kind, text), kind ``h1``/``h2``/``h3`` or ``p``, as a seeds-shaped document."""
    sections: list[dict[str, Any]] = []
    used: dict[str, int] = {}
    pending: str | None = None
    for kind, raw in blocks:
        text = raw.strip()
        if not text:
            continue
        if kind in ("h1", "h2"):
            if pending and sections:
                sections[-1]["paragraphs"].append(pending)
            pending = None
            sections.append(
                {"section_id": _section_id(text, used), "heading": text, "paragraphs": []}
            )
            continue
        if not sections:
            sections.append({"section_id": "intro", "heading": title, "paragraphs": []})
            used["intro"] = 1
        if kind == "h3":
            if pending:
                sections[-1]["paragraphs"].append(pending)
            pending = text
            continue
        sections[-1]["paragraphs"].append(f"{pending}\n{text}" if pending else text)
        pending = None
    if pending and sections:
        sections[-1]["paragraphs"].append(pending)
    return {
        "document_id": document_id,
        "title": title,
        "document_type": SETTINGS[corpus]["types"][0],
        "publication_state": "published",
        "sections": [s for s in sections if s["paragraphs"]],
    }


def _pdf_blocks(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """pypdfium2 text; the outline's entries (bookmarks) as headings, else pages as sections.

    An outline entry becomes a heading where a line of its page (or a later one) reads
    exactly its title: level 0 is the title, level 1 a section, deeper ones sub-headings.
    """
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        pages = [page.get_textpage().get_text_range() for page in document]
        outline = []
        for item in document.get_toc():
            destination = item.get_dest()
            page = destination.get_index() if destination is not None else None
            outline.append((" ".join(item.get_title().split()), item.level, page))
    finally:
        document.close()
    # pdfium marks a line break at a hyphen with U+FFFE; the hyphen was in the text.
    pages = [p.replace("\ufffe", "-").replace("\r\n", "\n") for p in pages]
    lines = [(number, line) for number, text in enumerate(pages) for line in text.split("\n")]
    first = next((line.strip() for _, line in lines if line.strip()), "")
    headings: dict[int, tuple[str, str]] = {}  # line index -> (kind, title)
    cursor = 0
    for title, level, page in outline:
        for index in range(cursor, len(lines)):
            number, line = lines[index]
            if (page is None or number >= page) and " ".join(line.split()) == title:
                headings[index] = ("h1" if level == 0 else "h2" if level == 1 else "h3", title)
                cursor = index + 1
                break
    if not headings:
        blocks: list[tuple[str, str]] = []
        for number, text in enumerate(pages, 1):
            blocks.append(("h2", f"Page {number}"))
            blocks.append(("p", text))
        return first, blocks
    blocks = []
    paragraph: list[str] = []
    title = ""
    for index, (_number, line) in enumerate(lines):
        if index in headings:
            blocks.append(("p", "\n".join(paragraph)))
            paragraph = []
            kind, text = headings[index]
            if kind == "h1" and not title:
                title = text
                continue
            blocks.append((kind, text))
        else:
            paragraph.append(line)
    blocks.append(("p", "\n".join(paragraph)))
    return title or first, blocks


def _docx_blocks(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """python-docx paragraphs and tables in body order; Heading 1/2/3+ styles as headings."""
    import docx

    blocks: list[tuple[str, str]] = []
    for block in docx.Document(str(path)).iter_inner_content():
        if hasattr(block, "rows"):
            rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows]
            blocks.append(("p", "\n".join(rows)))
            continue
        style = (block.style.name if block.style is not None else "") or ""
        level = re.match(r"Heading (\d)", style)
        if level:
            blocks.append(("h" + str(min(int(level.group(1)), 3)), block.text))
        else:
            blocks.append(("p", block.text))
    title = next((text for kind, text in blocks if kind == "h1" and text.strip()), "")
    if blocks and blocks[0] == ("h1", title):
        blocks = blocks[1:]
    return title, blocks


def _html_blocks(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """BeautifulSoup: boilerplate dropped, block elements of <main> (or <body>) in order."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text("utf-8"), "lxml")
    for tag in soup(["script", "style", "noscript", "nav", "header", "footer", "aside"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    blocks: list[tuple[str, str]] = []
    wanted = ["h1", "h2", "h3", "h4", "h5", "h6", "p", "pre", "ul", "ol", "table", "blockquote"]
    for element in main.find_all(wanted):
        if element.find_parent(["ul", "ol", "table", "blockquote", "pre"]) is not None:
            continue
        if element.name == "table":
            rows = [
                " | ".join(c.get_text(" ", strip=True) for c in tr.find_all(["td", "th"]))
                for tr in element.find_all("tr")
            ]
            blocks.append(("p", "\n".join(rows)))
        elif element.name in ("ul", "ol"):
            items = [li.get_text(" ", strip=True) for li in element.find_all("li")]
            blocks.append(("p", "\n".join(f"- {item}" for item in items)))
        elif element.name == "pre":
            blocks.append(("p", element.get_text()))
        elif element.name.startswith("h"):
            level = min(int(element.name[1]), 3)
            blocks.append((f"h{level}", element.get_text(" ", strip=True)))
        else:
            blocks.append(("p", element.get_text(" ", strip=True)))
    title_tag = soup.find("title")
    title = title_tag.get_text(strip=True) if title_tag else ""
    if blocks and blocks[0][0] == "h1":
        title = title or blocks[0][1]
        blocks = blocks[1:]
    return title, blocks


DIRECT = {"pdf": _pdf_blocks, "docx": _docx_blocks, "html": _html_blocks}


def direct_document(path: Path, root: Path, corpus: str) -> dict[str, Any]:
    """One rendered copy as a seeds-shaped JSON document (the ``direct`` adapter)."""
    fmt = path.suffix.lstrip(".")
    title, blocks = DIRECT[fmt](path)
    document_id = copy_id(path.relative_to(root).with_suffix("").as_posix(), fmt)
    return _document(document_id, title or path.stem, blocks, corpus)


# ---------------------------------------------------------------- runs


def copy_id(document_id: str, fmt: str) -> str:
    """A copy's document id: the Markdown path without ``.md``, other formats with their
    extension (the product's rule, so ``backup.pdf`` and ``backup.docx`` stay two)."""
    return document_id if fmt == "md" else f"{document_id}.{fmt}"


def copy_cases(cases: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """The questions with their relevant ids as the copy names its documents."""
    return [
        {
            **case,
            "relevant": [
                {**key, "document_id": copy_id(key["document_id"], fmt)} for key in case["relevant"]
            ],
        }
        for case in cases
    ]


def sample_ids(md_root: Path, size: int) -> list[str]:
    """Document ids of the Markdown copy: all, or every k-th of them (sorted) for ``size``."""
    ids = sorted(
        p.relative_to(md_root).with_suffix("").as_posix()
        for p in md_root.rglob("*.md")
        if p.name.lower() not in NOT_DOCUMENTS
    )
    if not ids:
        raise SystemExit(f"no Markdown copy in {md_root}: run benchmarks/render_corpus.py first")
    if size and len(ids) > size:
        step = len(ids) / size
        ids = [ids[int(i * step)] for i in range(size)]
    return ids


def ragwright(args: list[str], env: dict[str, str], python: str) -> dict[str, Any]:
    """Run ``python -m ragwright ARGS --json``; its JSON output."""
    done = subprocess.run(
        [python, "-m", "ragwright", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"ragwright {args[:2]} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def copy_source(
    rendered: Path, corpus: str, fmt: str, converter: str, scratch: Path, chosen: list[str]
) -> tuple[Path, list[str]]:
    """The folder to ingest for a copy and the document ids its files stand for."""
    root = rendered / corpus / fmt
    files = [root / f"{i}.{fmt}" for i in chosen]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(
            f"{len(missing)} {fmt} copies missing (e.g. {missing[0]}): run render_corpus.py"
        )
    ids = list(chosen)
    if fmt == "md" or converter == "product":
        if len(chosen) == len(list(root.rglob(f"*.{fmt}"))):
            return root, ids
        # A sample: the chosen files linked into a folder with the same relative paths.
        linked = scratch / f"{corpus}-{fmt}-sample"
        for file, document_id in zip(files, ids, strict=True):
            target = linked / f"{document_id}.{fmt}"
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(file)
        return linked, ids
    out = scratch / f"{corpus}-{fmt}-json"
    out.mkdir(parents=True, exist_ok=True)
    documents = [direct_document(f, root, corpus) for f in files]
    (out / "documents.json").write_text(json.dumps({"documents": documents}))
    return out, ids


def run_copy(
    corpus: str,
    fmt: str,
    args: argparse.Namespace,
    scratch: Path,
    cases: list[dict[str, Any]],
    chosen: list[str],
    answers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    source, ids = copy_source(args.rendered, corpus, fmt, args.converter, scratch, chosen)
    dataset = scratch / f"{corpus}-{fmt}.jsonl"
    dataset.write_text("".join(json.dumps(c) + "\n" for c in copy_cases(cases, fmt)))
    home = scratch / f"home-{corpus}-{fmt}"
    env = {**os.environ, "PYTHONPATH": str(args.pythonpath), "RAGWRIGHT_HOME": str(home)}
    own_metadata = SETTINGS[corpus].get("own_metadata", False)
    if args.defaults:
        # As a newcomer runs it: no chunking settings and no --type/--state at ingest;
        # unlabelled copies are then published runbooks, which the questions also search.
        kinds = sorted({*SETTINGS[corpus]["types"], "runbook"})
        defaults: list[str] = []
    else:
        env["RAGWRIGHT_CHUNKING"] = "sentence-blocks"
        env["RAGWRIGHT_MAX_WORDS"] = str(SETTINGS[corpus]["max_words"])
        env["RAGWRIGHT_MAX_TOKENS"] = "256"
        kinds = SETTINGS[corpus]["types"]
    types = [arg for kind in kinds for arg in ("--type", kind)]
    if not own_metadata and not args.defaults:
        defaults = [*types, "--state", "published"]
    elif not args.defaults:
        defaults = []
    started = time.perf_counter()
    ingested = ragwright(["ingest", str(source), *defaults], env, args.ragwright_python)
    ingest_s = time.perf_counter() - started
    runs = {}
    for mode in args.mode:
        started = time.perf_counter()
        evaluated = ragwright(
            ["eval", "run", str(dataset), *types, "--mode", mode, "--k", "1,3,5,10"],
            env,
            args.ragwright_python,
        )
        run = json.loads((Path(evaluated["path"]) / "run.json").read_text())
        runs[mode] = {
            "ndcg@10": evaluated["summary"]["K"]["10"]["ndcg"],
            "recall@10": evaluated["summary"]["K"]["10"]["recall"],
            "mrr@10": evaluated["summary"]["K"]["10"]["reciprocal_rank"],
            "categories": {
                name: {"cases": c["cases"], "ndcg@10": c["K"]["10"]["ndcg"]}
                for name, c in evaluated["categories"].items()
            },
            "top1": {  # compared across copies without the copy's extension
                c["id"]: c["ranking"][0]["key"][0].removesuffix(f".{fmt}") if c["ranking"] else None
                for c in run["cases"]
            },
            "case_ndcg": {c["id"]: c["metrics"]["10"]["ndcg"] for c in run["cases"]},
            "eval_s": round(time.perf_counter() - started, 1),
        }
    extra: dict[str, Any] = {}
    if own_metadata:
        extra["metadata"] = {
            m["document_id"].removesuffix(f".{fmt}"): {
                "document_type": m["document_type"],
                "publication_state": m["publication_state"],
                "type_from": m["type_from"],
            }
            for m in ingested.get("metadata", [])
        }
    for style in args.answer_styles if answers is not None else []:
        asked = answers if style == "evidence" else [c for c in answers if c["relevant"]]
        asked = asked if style == "evidence" else asked[: args.quoted]
        key = "answers" if style == "evidence" else f"{style}_answers"
        started = time.perf_counter()
        extra[key] = {c["id"]: answer(c["question"], style, fmt, types, env, args) for c in asked}
        extra[f"{key}_s"] = round(time.perf_counter() - started, 1)
    return {
        **extra,
        "files": len(ids),
        "documents": ingested["documents"],
        "chunks": ingested["chunks"],
        "skipped_files": ingested.get("skipped_files", []),
        "skipped_documents": ingested.get("skipped_documents", []),
        "ingest_s": round(ingest_s, 1),
        "runs": runs,
    }


# ---------------------------------------------------------------- answers


def answer(
    question: str,
    style: str,
    fmt: str,
    types: list[str],
    env: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """``ragwright ask QUESTION --style STYLE``: its status, text and cited documents (stems)."""
    result = ragwright(["ask", question, "--style", style, *types], env, args.ragwright_python)
    return {
        "status": result["status"],
        "text": answer_text(result),
        "cited": sorted({c["document_id"].removesuffix(f".{fmt}") for c in result["citations"]}),
    }


def answer_text(result: dict[str, Any]) -> str:
    """What the answer says: its text, else its quoted evidence sentences in order."""
    text = (result.get("answer") or "").strip()
    if text:
        return text
    return " ".join(" ".join(q["text"].split()) for q in result.get("quotes") or [])


def token_f1(text: str, reference: str) -> float:
    """Bag-of-words F1 of ``text`` against ``reference`` (lower-cased word tokens);
    1.0 when both are empty."""
    ours, theirs = (
        Counter(re.findall(r"\w+", text.lower())),
        Counter(re.findall(r"\w+", reference.lower())),
    )
    if not ours and not theirs:
        return 1.0
    overlap = sum((ours & theirs).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(ours.values()), overlap / sum(theirs.values())
    return 2 * precision * recall / (precision + recall)


def compare_answers(copies: dict[str, dict[str, Any]], key: str = "answers") -> dict[str, Any]:
    """Per copy, its answers against the Markdown copy's: questions, identical answer text
    (and status), identical cited documents, mean token F1, and the questions that differ."""
    base = copies["md"][key]
    summary = {}
    for fmt, copy in copies.items():
        ours = copy[key]
        f1 = {i: token_f1(ours[i]["text"], base[i]["text"]) for i in base}
        same_text = [
            i
            for i in base
            if (ours[i]["status"], ours[i]["text"]) == (base[i]["status"], base[i]["text"])
        ]
        same_cited = [i for i in base if ours[i]["cited"] == base[i]["cited"]]
        summary[fmt] = {
            "questions": len(base),
            "same_text": len(same_text),
            "same_cited": len(same_cited),
            "mean_f1": round(sum(f1.values()) / len(f1), 4) if f1 else 1.0,
            "differ": sorted(set(base) - set(same_text) | set(base) - set(same_cited)),
        }
    return summary


def compare_copies(
    corpus: str, copies: dict[str, dict[str, Any]], modes: list[str], tolerance: float
) -> list[str]:
    """Add each copy's difference to the Markdown copy to its runs; the copies outside
    ``tolerance`` (``corpus/format/mode``)."""
    failed = []
    for mode in modes:
        base = copies["md"]["runs"][mode]
        for fmt, copy in copies.items():
            run = copy["runs"][mode]
            run["diff_to_md"] = round(run["ndcg@10"] - base["ndcg@10"], 4)
            same = sum(run["top1"][i] == base["top1"][i] for i in base["top1"])
            run["top1_same_as_md"] = round(same / len(base["top1"]), 4)
            run["cases_changed"] = sum(
                abs(run["case_ndcg"][i] - base["case_ndcg"][i]) > 1e-9 for i in base["case_ndcg"]
            )
            within = abs(run["ndcg@10"] - base["ndcg@10"]) <= tolerance
            if not within:
                failed.append(f"{corpus}/{fmt}/{mode}")
            print(
                f"{corpus:8} {fmt:4} {mode:6} nDCG@10 {run['ndcg@10']:.4f} "
                f"diff {run['diff_to_md']:+.4f} top-1 same {run['top1_same_as_md']:.3f} "
                f"docs {copy['documents']}/{copy['files']} chunks {copy['chunks']} "
                f"{'ok' if within else 'OUTSIDE TOLERANCE'}",
                flush=True,
            )
    return failed


def markdown_table(result: dict[str, Any]) -> str:
    """nDCG@10 per copy and its difference to the Markdown copy, as a Markdown table."""
    lines = [
        "| corpus (documents, questions) | converters | copy | nDCG@10 | vs Markdown "
        "| top-1 same as Markdown | documents | chunks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for corpus, figures in result["corpora"].items():
        label = f"{corpus} ({figures['documents']}, {figures['questions']})"
        for fmt, copy in figures["copies"].items():
            for mode, run in copy["runs"].items():
                lines.append(
                    f"| {label} | {figures.get('converter', result['converter'])} | {fmt} "
                    f"({mode}) | {run['ndcg@10']:.4f} | {run['diff_to_md']:+.4f} "
                    f"| {run['top1_same_as_md']:.3f} | {copy['documents']}/{copy['files']} "
                    f"| {copy['chunks']} |"
                )
    return "\n".join(lines)


def answers_table(result: dict[str, Any]) -> str:
    """The copies' answers against the Markdown copy's (corpora that have them), with nDCG@10."""
    lines = [
        "| corpus | copy | style | questions | same answer text | same cited documents "
        "| mean token F1 vs Markdown | nDCG@10 (hybrid) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for corpus, figures in result["corpora"].items():
        for key, style in (("answers_vs_md", "evidence"), ("quoted_answers_vs_md", "quoted")):
            for fmt, row in figures.get(key, {}).items():
                ndcg = figures["copies"][fmt]["runs"].get("hybrid", {}).get("ndcg@10")
                lines.append(
                    f"| {corpus} | {fmt} | {style} | {row['questions']} | {row['same_text']} "
                    f"| {row['same_cited']} | {row['mean_f1']:.3f} "
                    f"| {'' if ndcg is None else f'{ndcg:.4f}'} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpus", nargs="+", choices=sorted(SETTINGS), default=["runbooks", "clapnq"]
    )
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--converter", choices=("product", "direct"), default="product")
    parser.add_argument("--rendered", type=Path, default=RENDERED)
    parser.add_argument("--pythonpath", type=Path, default=ROOT / "src")
    parser.add_argument(
        "--ragwright-python",
        default=str(ROOT / ".venv" / "bin" / "python")
        if (ROOT / ".venv" / "bin" / "python").exists()
        else sys.executable,
        help="the Python that has ragwright's dependencies (default: .venv, else this one)",
    )
    parser.add_argument(
        "--mode", nargs="+", default=["hybrid"], choices=("hybrid", "dense", "sparse")
    )
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="ingest with no chunking settings and no --type/--state (the bare command); "
        "without it, sentence-blocks at the corpus's budget and 256 tokens, as before",
    )
    parser.add_argument(
        "--sample", type=int, default=0, help="every k-th document, N per corpus (0: all)"
    )
    parser.add_argument(
        "--answer-styles",
        nargs="+",
        choices=("evidence", "quoted"),
        default=["evidence"],
        help="samples: answer the questions in these styles (evidence: all of them, no model; "
        "quoted: the first --quoted answerable ones, with the local model, slow)",
    )
    parser.add_argument(
        "--quoted", type=int, default=5, help="questions for --answer-styles quoted"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--label", default="", help="what the converters are (e.g. a commit)")
    parser.add_argument("--table", action="store_true", help="print --out as Markdown")
    args = parser.parse_args()
    if args.table:
        out = args.out or RESULTS / f"rendered_quality_{args.converter}.json"
        shown = json.loads(out.read_text())
        print(markdown_table(shown))
        if any(k.endswith("answers_vs_md") for f in shown["corpora"].values() for k in f):
            print()
            print(answers_table(shown))
        return
    if "md" not in args.formats:
        args.formats.insert(0, "md")
    failed = []
    result: dict[str, Any] = {
        "benchmark": "rendered_quality",
        "converter": args.converter,
        "defaults": args.defaults,
        "load_average_before": list(os.getloadavg()),
        "pythonpath": str(args.pythonpath),
        "tolerance": args.tolerance,
        "sample": args.sample,
        "corpora": {},
    }
    with tempfile.TemporaryDirectory(prefix="ragwright-rendered-") as tmp:
        scratch = Path(tmp)
        for corpus in args.corpus:
            md_root = args.rendered / corpus / "md"
            answers = None
            if corpus == "samples":
                if args.converter != "product":
                    raise SystemExit("samples: only --converter product keeps their drafts")
                answers = sample_cases()  # nDCG: the answerable ones
                cases = [
                    {k: v for k, v in c.items() if k != "unsupported"}
                    for c in answers
                    if c["relevant"]
                ]
            elif corpus == "runbooks":
                cases = runbook_cases(md_root)
            else:
                cases = clapnq_cases()
            chosen = sample_ids(md_root, args.sample)
            present = set(chosen)
            cases = [c for c in cases if all(r["document_id"] in present for r in c["relevant"])]
            copies = {}
            for fmt in args.formats:
                print(f"{corpus} {fmt}: ingesting and evaluating", flush=True)
                copies[fmt] = run_copy(corpus, fmt, args, scratch, cases, chosen, answers)
            failed += compare_copies(corpus, copies, args.mode, args.tolerance)
            compared = {}
            for key in ("answers", "quoted_answers"):
                if all(key in copy for copy in copies.values()):
                    compared[f"{key}_vs_md"] = compare_answers(copies, key)
                    for fmt, figures in compared[f"{key}_vs_md"].items():
                        print(f"{corpus:8} {fmt:4} {key}: {json.dumps(figures)}", flush=True)
            for copy in copies.values():
                for run in copy["runs"].values():
                    del run["top1"], run["case_ndcg"]
            result["corpora"][corpus] = {
                "sample": args.sample,
                "pythonpath": str(args.pythonpath),
                "converter": args.converter,
                "label": args.label,
                "documents": len(chosen),
                "questions": len(cases),
                "categories": sorted({c["category"] for c in cases}),
                **({"answer_questions": len(answers)} if answers else {}),
                **compared,
                "copies": copies,
            }
    result["load_average_after"] = list(os.getloadavg())
    out = (
        args.out or RESULTS / f"rendered_quality_{args.converter}{'_defaults' * args.defaults}.json"
    )
    if out.exists():  # a run of some corpora keeps the others' figures (each says its sample)
        earlier = json.loads(out.read_text())
        for corpus, figures in earlier.get("corpora", {}).items():
            result["corpora"].setdefault(corpus, figures)
        failed += [f for f in earlier.get("failed", []) if f.split("/")[0] not in args.corpus]
    result["failed"] = failed
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    if failed:
        raise SystemExit(f"outside ±{args.tolerance}: {', '.join(failed)}")


if __name__ == "__main__":
    main()
