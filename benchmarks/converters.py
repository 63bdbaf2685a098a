"""Compare candidate document converters on the same files (issue 22, item 5).

The files are the rendered copies of ``benchmarks/render_corpus.py`` (run it first): the
OpenShift runbooks and the ClapNQ passages as PDF (pandoc → DOCX → LibreOffice), DOCX
(pandoc) and HTML (pandoc, wrapped in navigation, breadcrumb, footer and a script). The
known source of every copy is its Markdown original, so text fidelity is measured against
it:

- the reference text is the Markdown original without front matter, link targets and
  link definitions, image links, HTML comments, code-fence lines and ordered-list
  numbers (HTML and Word number list items themselves, outside the text); both sides
  are NFKC-normalised, lower-cased and split into word tokens (``\\w+``), so markup
  characters count for nothing;
- **token F1**: precision and recall of the converted text's token multiset against the
  reference's (boilerplate a converter keeps lowers precision, text it loses lowers
  recall);
- **order**: ``difflib.SequenceMatcher`` ratio of the two token sequences (reading order);
- **empty**: files for which the converter returned no text or raised (named in the JSON).

Each (format, converter) pair runs in its own fresh Python process, converting every file
once, timed around the conversion loop only: files/s and, for PDF, pages/s (pages counted
with pypdfium2 beforehand); the process's peak RSS (``ru_maxrss`` of the child, via
``os.wait4``) and, in a second process that only imports the library, the import's peak
RSS (the difference is what converting adds). Install size is the sum of the files every
distribution the converter needs lists in its RECORD (the converter's package and its
dependencies, recursively, without extras), in the benchmark venv; licences are read
from the same metadata and every dependency whose licence names the (A)GPL is flagged.

The candidates live in a separate venv, not the project's::

    python3.11 -m venv /work/bench-venv
    /work/bench-venv/bin/pip install pypdf pypdfium2 pdfminer.six pdfplumber trafilatura \\
        beautifulsoup4 markdownify html2text python-docx mammoth 'markitdown[pdf,docx,pptx]'
    /work/bench-venv/bin/python benchmarks/converters.py [--per-corpus N] [--out PATH]

``--per-corpus N`` takes every k-th file of each corpus so that N of each are measured
(default 60; 0 = all). ``pdf-samples`` runs the PDF converters on the 30 public test
PDFs of ``../shared/data/documents/pdf-samples`` (no known source text: files that
raise or give no text, and speed). Results: ``benchmarks/results/converters.json`` (a run with
``--formats`` keeps the other formats' rows of an existing file).
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RENDERED = ROOT / ".ragwright" / "rendered"
RESULTS = ROOT / "benchmarks" / "results" / "converters.json"
CORPORA = ("runbooks", "clapnq")

# (format, converter) -> (distribution names it needs, one-line description)
CANDIDATES: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("pdf", "pypdf"): (("pypdf",), "PdfReader(...).pages[i].extract_text()"),
    ("pdf", "pypdfium2"): (("pypdfium2",), "PdfDocument(...)[i].get_textpage().get_text_range()"),
    ("pdf", "pdfminer.six"): (("pdfminer.six",), "pdfminer.high_level.extract_text(path)"),
    ("pdf", "pdfplumber"): (("pdfplumber",), "pdfplumber.open(path).pages[i].extract_text()"),
    ("pdf", "markitdown"): (("markitdown", "pdfminer.six", "pdfplumber"), "MarkItDown().convert"),
    ("docx", "python-docx"): (("python-docx",), "paragraphs and tables in body order"),
    ("docx", "mammoth"): (("mammoth",), "mammoth.extract_raw_text"),
    ("docx", "markitdown"): (("markitdown", "mammoth", "lxml"), "MarkItDown().convert"),
    ("html", "trafilatura"): (("trafilatura",), "trafilatura.extract(markdown, tables)"),
    ("html", "bs4-main"): (
        ("beautifulsoup4", "lxml"),
        "BeautifulSoup: drop script/style/nav/header/footer/aside, text of <main> or <body>",
    ),
    ("html", "markdownify"): (("markdownify",), "markdownify(whole page)"),
    ("html", "html2text"): (("html2text",), "HTML2Text(body_width=0).handle(whole page)"),
    ("html", "markitdown"): (("markitdown",), "MarkItDown().convert"),
}
EXCLUDED = {
    "PyMuPDF (pymupdf, pymupdf4llm)": "AGPL-3.0 (or a commercial licence): not in a default "
    "install by the project's rule; not measured",
    "docling": "MIT, but its standard pipeline needs torch and torchvision and fetches its "
    "layout/table model weights from a model hub at first run (docling-ibm-models via "
    "huggingface-hub): cannot run offline here, and a torch stack is heavy for 2 cores",
    "unstructured": "Apache-2.0; the base package pulls spacy, numba, langdetect, "
    "unstructured-client; its PDF 'fast' strategy is pdfminer.six (measured above), "
    "'hi_res' needs unstructured-inference models from a model hub: not measured",
}


# ---------------------------------------------------------------- converters (worker side)


def _pdf_pypdf(path: Path) -> str:
    from pypdf import PdfReader

    return "\n\n".join(page.extract_text() or "" for page in PdfReader(path).pages)


def _pdf_pypdfium2(path: Path) -> str:
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        return "\n\n".join(page.get_textpage().get_text_range() for page in document)
    finally:
        document.close()


def _pdf_pdfminer(path: Path) -> str:
    from pdfminer.high_level import extract_text

    return str(extract_text(path))


def _pdf_pdfplumber(path: Path) -> str:
    import pdfplumber

    with pdfplumber.open(path) as pdf:
        return "\n\n".join(page.extract_text() or "" for page in pdf.pages)


_MARKITDOWN: dict[str, Any] = {}


def _markitdown(path: Path) -> str:
    if not _MARKITDOWN:
        from markitdown import MarkItDown

        _MARKITDOWN["converter"] = MarkItDown(enable_plugins=False)
    return str(_MARKITDOWN["converter"].convert(str(path)).text_content)


def _docx_python_docx(path: Path) -> str:
    import docx

    parts = []
    for block in docx.Document(str(path)).iter_inner_content():
        if hasattr(block, "rows"):
            for row in block.rows:
                parts.append(" | ".join(cell.text for cell in row.cells))
        else:
            parts.append(block.text)
    return "\n\n".join(parts)


def _docx_mammoth(path: Path) -> str:
    import mammoth

    with path.open("rb") as handle:
        return str(mammoth.extract_raw_text(handle).value)


def _html_trafilatura(path: Path) -> str:
    import trafilatura

    text = trafilatura.extract(
        path.read_text("utf-8"), output_format="markdown", include_tables=True
    )
    return text or ""


def _html_bs4(path: Path) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text("utf-8"), "lxml")
    for tag in soup(["script", "style", "noscript", "nav", "header", "footer", "aside"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    return str(main.get_text("\n"))


def _html_markdownify(path: Path) -> str:
    from markdownify import markdownify

    return str(markdownify(path.read_text("utf-8")))


def _html_html2text(path: Path) -> str:
    import html2text

    converter = html2text.HTML2Text()
    converter.body_width = 0
    return str(converter.handle(path.read_text("utf-8")))


CONVERTERS: dict[tuple[str, str], Callable[[Path], str]] = {
    ("pdf", "pypdf"): _pdf_pypdf,
    ("pdf", "pypdfium2"): _pdf_pypdfium2,
    ("pdf", "pdfminer.six"): _pdf_pdfminer,
    ("pdf", "pdfplumber"): _pdf_pdfplumber,
    ("pdf", "markitdown"): _markitdown,
    ("docx", "python-docx"): _docx_python_docx,
    ("docx", "mammoth"): _docx_mammoth,
    ("docx", "markitdown"): _markitdown,
    ("html", "trafilatura"): _html_trafilatura,
    ("html", "bs4-main"): _html_bs4,
    ("html", "markdownify"): _html_markdownify,
    ("html", "html2text"): _html_html2text,
    ("html", "markitdown"): _markitdown,
}
IMPORTS = {
    "pypdf": "pypdf",
    "pypdfium2": "pypdfium2",
    "pdfminer.six": "pdfminer.high_level",
    "pdfplumber": "pdfplumber",
    "markitdown": "markitdown",
    "python-docx": "docx",
    "mammoth": "mammoth",
    "trafilatura": "trafilatura",
    "bs4-main": "bs4",
    "markdownify": "markdownify",
    "html2text": "html2text",
}


# ---------------------------------------------------------------- fidelity


def reference_text(markdown: str) -> str:
    """The text a reader sees in a Markdown file: no front matter, link targets or markup."""
    lines = markdown.lstrip("\ufeff").split("\n")
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() in ("---", "..."):
                lines = lines[index + 1 :]
                break
    text = "\n".join(line for line in lines if not line.lstrip().startswith(("```", "~~~")))
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)  # images: pandoc drops missing ones
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text only
    text = re.sub(r"<(https?://[^>]+)>", r"\1", text)
    text = re.sub(r"^[ \t]*\[[^\]]+\]:[ \t]*\S+.*$", " ", text, flags=re.M)  # link definitions
    # Ordered-list numbers are markup: HTML and Word number the items themselves.
    return re.sub(r"^([ \t]*(?:>[ \t]*)?)\d+[.)][ \t]", r"\1", text, flags=re.M)


def tokens(text: str) -> list[str]:
    """NFKC, lower-cased word tokens."""
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text).lower())


def fidelity(converted: list[str], reference: list[str]) -> dict[str, float]:
    """Token-multiset precision/recall/F1 and the sequence ratio of two token lists."""
    common = sum((Counter(converted) & Counter(reference)).values())
    precision = common / len(converted) if converted else 0.0
    recall = common / len(reference) if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if common else 0.0
    order = difflib.SequenceMatcher(None, converted, reference, autojunk=False).ratio()
    return {"precision": precision, "recall": recall, "f1": f1, "order": order}


# ---------------------------------------------------------------- worker


def worker(fmt: str, name: str, listing: Path, out: Path, import_only: bool) -> None:
    """Convert every listed file (timed), then score them; write JSON to ``out``."""
    if import_only:
        __import__(IMPORTS[name])
        if name == "markitdown":  # its constructor loads magika's ONNX model
            from markitdown import MarkItDown

            MarkItDown(enable_plugins=False)
        out.write_text("{}")
        return
    pairs = json.loads(listing.read_text())
    convert = CONVERTERS[(fmt, name)]
    texts: dict[str, str] = {}
    failures: dict[str, str] = {}
    started = time.perf_counter()
    for copy, _original in pairs:
        try:
            texts[copy] = convert(Path(copy))
        except Exception as error:  # a failure is a measured outcome
            failures[copy] = f"{type(error).__name__}: {error}"[:200]
    seconds = time.perf_counter() - started
    scores = []
    empty: list[str] = []  # converted without an exception, but no word of text
    for copy, original in pairs:
        if copy in failures:
            continue
        converted = tokens(texts[copy])
        if not converted:
            empty.append(copy)
        if not original:  # a real-world file: no known source, only outcome and speed
            continue
        reference = tokens(reference_text(Path(original).read_text("utf-8-sig")))
        scores.append({"file": copy, **fidelity(converted, reference)})
    out.write_text(
        json.dumps({"seconds": seconds, "scores": scores, "failures": failures, "empty": empty})
    )


def run_child(args: list[str]) -> int:
    """Run this script as a child process; its peak RSS in KiB."""
    process = subprocess.Popen([sys.executable, __file__, *args])
    _pid, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"worker {args} failed")
    return int(usage.ru_maxrss)


# ---------------------------------------------------------------- install size, licence


def _requirements(dist: md.Distribution) -> list[str]:
    names = []
    for requirement in dist.requires or []:
        if "extra ==" in requirement:
            continue
        marker = requirement.split(";", 1)
        if len(marker) == 2 and "python_version" not in marker[1]:
            if "sys_platform" in marker[1] and "linux" not in marker[1]:
                continue
            if "platform_system" in marker[1] and "Linux" not in marker[1]:
                continue
        names.append(re.split(r"[ ;<>=!~\[(]", marker[0].strip(), maxsplit=1)[0])
    return names


def closure(names: tuple[str, ...]) -> dict[str, md.Distribution]:
    """The named distributions and their dependencies (recursively, installed ones)."""
    found: dict[str, md.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        found[key] = dist
        todo.extend(_requirements(dist))
    return found


def dist_size(dist: md.Distribution) -> int:
    total = 0
    for file in dist.files or []:
        path = Path(str(dist.locate_file(file)))
        if path.is_file():
            total += path.stat().st_size
    return total


def licence(dist: md.Distribution) -> str:
    meta = dist.metadata
    expression = meta.get("License-Expression")
    if expression:
        return str(expression)
    classifiers = [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if "License" in c]
    if classifiers:
        return ", ".join(classifiers)
    text = str(meta.get("License") or "unknown").strip().split("\n")[0]
    return text[:60]


def footprint(names: tuple[str, ...]) -> dict[str, Any]:
    dists = closure(names)
    licences = {key: licence(dist) for key, dist in sorted(dists.items())}
    return {
        "distributions": {key: dists[key].version for key in sorted(dists)},
        "install_mib": round(sum(dist_size(d) for d in dists.values()) / 2**20, 1),
        "licence": licence(dists[re.sub(r"[-_.]+", "-", names[0]).lower()]),
        "gpl_flagged": {k: v for k, v in licences.items() if "GPL" in v.upper()},
        "load_average_1m": round(os.getloadavg()[0], 1),
        "licences": licences,
    }


# ---------------------------------------------------------------- driver


def sample(rendered: Path, corpus: str, fmt: str, per_corpus: int) -> list[tuple[str, str]]:
    """(copy, Markdown original) pairs: every k-th file, ``per_corpus`` of them."""
    base = rendered / corpus
    copies = sorted((base / fmt).rglob(f"*.{fmt}"))
    if not copies:
        raise SystemExit(f"no {fmt} copies in {base}: run benchmarks/render_corpus.py first")
    if per_corpus and len(copies) > per_corpus:
        step = len(copies) / per_corpus
        copies = [copies[int(i * step)] for i in range(per_corpus)]
    return [
        (str(c), str(base / "md" / c.relative_to(base / fmt).with_suffix(".md"))) for c in copies
    ]


def pdf_samples() -> list[tuple[str, str]]:
    """The public test PDFs of ../shared/data (no known source text): (file, "") pairs."""
    root = ROOT.parent / "shared" / "data" / "documents" / "pdf-samples"
    listed = json.loads((root / "files.json").read_text())["data"]
    # files.json also lists the two large files the data folder leaves out
    return [(str(root / e["path"]), "") for e in listed if (root / e["path"]).is_file()]


def pdf_pages(paths: list[str]) -> int:
    import pypdfium2

    total = 0
    for path in paths:
        try:
            document = pypdfium2.PdfDocument(path)
        except Exception:  # password-protected or broken: its pages are unknown
            continue
        total += len(document)
        document.close()
    return total


def mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _three(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown_table(result: dict[str, Any]) -> str:
    """The comparison as a Markdown table (for docs/ingestion.md and benchmarks/README.md)."""
    lines = [
        "| format | converter | token F1 | precision | recall | order | files/s | pages/s "
        "| peak RSS MiB (import) | install MiB | licence | failed/empty |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        licence_text = row["licence"]
        if row["gpl_flagged"]:
            named = "; ".join(f"{k}: {v}" for k, v in row["gpl_flagged"].items())
            licence_text += f" (GPL named: {named})"
        lines.append(
            f"| {row['format']} | {row['converter']} | {_three(row['f1'])} "
            f"| {_three(row['precision'])} | {_three(row['recall'])} | {_three(row['order'])} "
            f"| {row['files_per_s']} "
            f"| {row['pages_per_s'] or '–'} | {row['peak_rss_mib']} ({row['import_rss_mib']}) "
            f"| {row['install_mib']} | {licence_text} "
            f"| {len(row['failures'])}/{len(row['empty'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-corpus", type=int, default=60)
    parser.add_argument(
        "--formats",
        nargs="+",
        default=["pdf", "docx", "html", "pdf-samples"],
        choices=["pdf", "docx", "html", "pdf-samples"],
    )
    parser.add_argument("--only", nargs="*", default=None, help="converter names")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--rendered", type=Path, default=RENDERED, help="render_corpus --out")
    parser.add_argument("--worker", nargs=3, metavar=("FMT", "NAME", "LISTING"))
    parser.add_argument("--worker-out", type=Path)
    parser.add_argument("--import-only", action="store_true")
    parser.add_argument("--table", action="store_true", help="print --out as Markdown")
    args = parser.parse_args()
    if args.table:
        print(markdown_table(json.loads(args.out.read_text())))
        return
    if args.worker:
        fmt, name, listing = args.worker
        worker(fmt, name, Path(listing), args.worker_out, args.import_only)
        return
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory(prefix="ragwright-conv-") as scratch:
        for fmt in args.formats:
            if fmt == "pdf-samples":
                pairs = pdf_samples()
            else:
                pairs = [
                    p
                    for corpus in CORPORA
                    for p in sample(args.rendered, corpus, fmt, args.per_corpus)
                ]
            listing = Path(scratch) / f"{fmt}.json"
            listing.write_text(json.dumps(pairs))
            pages = pdf_pages([c for c, _ in pairs]) if fmt.startswith("pdf") else None
            kind = "pdf" if fmt == "pdf-samples" else fmt
            for (candidate_fmt, name), (dists, how) in CANDIDATES.items():
                if candidate_fmt != kind or (args.only and name not in args.only):
                    continue
                out = Path(scratch) / f"{fmt}-{name}.json"
                base = ["--worker", kind, name, str(listing), "--worker-out", str(out)]
                import_kib = run_child([*base, "--import-only"])
                peak_kib = run_child(base)
                measured = json.loads(out.read_text())
                by_corpus = {}
                for corpus in CORPORA:
                    mine = [s for s in measured["scores"] if f"/{corpus}/" in s["file"]]
                    by_corpus[corpus] = {
                        metric: mean([s[metric] for s in mine])
                        for metric in ("f1", "precision", "recall", "order")
                    }
                scores = measured["scores"]
                row = {
                    "format": fmt,
                    "converter": name,
                    "how": how,
                    "files": len(pairs),
                    "pages": pages,
                    "seconds": round(measured["seconds"], 2),
                    "files_per_s": round(len(pairs) / measured["seconds"], 1),
                    "pages_per_s": round(pages / measured["seconds"], 1) if pages else None,
                    "f1": mean([s["f1"] for s in scores]),
                    "precision": mean([s["precision"] for s in scores]),
                    "recall": mean([s["recall"] for s in scores]),
                    "order": mean([s["order"] for s in scores]),
                    "by_corpus": by_corpus,
                    "failures": measured["failures"],
                    "empty": [os.path.relpath(p, args.rendered) for p in measured["empty"]],
                    "peak_rss_mib": round(peak_kib / 1024, 1),
                    "import_rss_mib": round(import_kib / 1024, 1),
                    **footprint(dists),
                }
                rows.append(row)
                print(
                    f"{fmt:5} {name:13} F1 {_three(row['f1'])} order {_three(row['order'])} "
                    f"P {_three(row['precision'])} R {_three(row['recall'])} "
                    f"{row['files_per_s']:7.1f} files/s "
                    f"{row['pages_per_s'] or '':>7} pages/s peak {row['peak_rss_mib']} MiB "
                    f"(import {row['import_rss_mib']}) install {row['install_mib']} MiB "
                    f"{row['licence']} failed {len(row['failures'])} empty {len(row['empty'])}",
                    flush=True,
                )
            save(args.out, args.per_corpus, rows)
    print(f"wrote {args.out}")


def save(out: Path, per_corpus: int, rows: list[dict[str, Any]]) -> None:
    """Write the rows measured so far; an existing file's rows of other formats are kept."""
    done = {r["format"] for r in rows}
    if out.exists():
        earlier = json.loads(out.read_text())
        rows = [r for r in earlier.get("rows", []) if r["format"] not in done] + rows
    rows = sorted(rows, key=lambda r: ("pdf", "docx", "html", "pdf-samples").index(r["format"]))
    result = {
        "benchmark": "converters",
        "per_corpus": per_corpus,
        "corpora": list(CORPORA),
        "python": sys.version.split()[0],
        "rows": rows,
        "excluded": EXCLUDED,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
