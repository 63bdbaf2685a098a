"""A self-contained HTML report of an evaluation run (no scripts, no external assets).

Sections: summary per K first, answer summary (answer runs), the comparison with an
earlier run (when given), Precision/Recall/nDCG@K curves (inline SVG), the per-category
and per-case tables, the retrieved evidence of every case (collapsible: ids, scores with
their kind, the text when the run stored it — the default — and the answer of answer
runs), unsupported-question outcomes, and last the run configuration, folded. Every text from the run — question, chunk text,
answer — is escaped: document text is untrusted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ragwright.pipeline.evaluate import METRICS, CaseChange, compare_runs

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1b1f24}
h1{font-size:1.5rem}summary h2{display:inline;border:0}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;width:100%}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.miss{color:#b42318}.ok{color:#067647}.muted{color:#656d76}code{font-size:.9em}
dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem;margin:.2rem 0}
dt{font-weight:600}dd{margin:0}
.plots{display:flex;flex-wrap:wrap;gap:1rem}
details{border:1px solid #d0d7de;border-radius:4px;margin:.4rem 0;padding:.3rem .6rem}
summary{cursor:pointer}.text{white-space:pre-wrap;max-height:9rem;overflow:auto;margin:0}
.status{font-weight:600;padding:0 .3rem;border:1px solid currentColor;border-radius:3px}
blockquote{margin:.4rem 0;padding:.3rem .8rem;border-left:3px solid #d0d7de;white-space:pre-wrap}
"""
_LABELS = {"precision": "Precision", "recall": "Recall", "reciprocal_rank": "RR", "ndcg": "nDCG"}
_SCORE_KINDS = {"cosine": "dense cosine", "bm25": "BM25", "rrf": "RRF fusion", "rerank": "rerank"}
_CURVES = (("precision", "#8250df"), ("recall", "#0969da"), ("ndcg", "#bf3989"))
_TOLERANCE = 1e-9
NO_TEXT = "text not recorded (the run was made with --without-text)"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _score(value: float) -> str:
    """Four significant digits: RRF scores (≈0.016) and BM25 scores (≈10) both stay legible."""
    return f"{value:.4g}"


def _delta(value: float) -> str:
    css = "ok" if value > _TOLERANCE else "miss" if value < -_TOLERANCE else "muted"
    return f"<td class='num {css}'>{value:+.3f}</td>"


def _value(value: Any) -> str:
    """A configuration value as HTML: none, yes/no, comma-separated lists, nested
    definition lists for mappings; never a Python repr."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        if not value:
            return "empty"
        return _definitions(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ", ".join(_value(item) for item in value) if value else "empty"
    return f"<code>{escape(str(value))}</code>"


def _definitions(values: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<dt>{escape(str(name))}</dt><dd>{_value(value)}</dd>" for name, value in values.items()
    )
    return f"<dl>{rows}</dl>"


def _metric_table(by_k: dict[str, dict[str, float]], cases: int) -> str:
    head = "".join(f"<th>{_LABELS[m]}@K</th>" for m in METRICS)
    rows = "".join(
        f"<tr><td>{escape(k)}</td>"
        + "".join(f'<td class="num">{_num(values[m])}</td>' for m in METRICS)
        + "</tr>"
        for k, values in by_k.items()
    )
    return f"<p>{cases} answerable cases, macro-averaged.</p><table><tr><th>K</th>{head}</tr>{rows}</table>"


def _curve(
    by_k: dict[str, dict[str, float]],
    metric: str,
    color: str,
    earlier: dict[str, dict[str, float]] | None = None,
) -> str:
    """``metric``@K against K as an inline SVG line; ``earlier`` adds a dashed grey line."""
    points = [(int(k), v[metric]) for k, v in by_k.items()]
    if not points:
        return ""
    before = [(int(k), v[metric]) for k, v in (earlier or {}).items() if metric in v]
    label = _LABELS[metric]
    width, height, pad = 340, 220, 36
    max_k = max(k for k, _ in points + before)

    def x(k: int) -> float:
        return pad + (width - 2 * pad) * (k / max_k if max_k else 0)

    def y(r: float) -> float:
        return height - pad - (height - 2 * pad) * r

    def line(series: list[tuple[int, float]]) -> str:
        return " ".join(f"{x(k):.1f},{y(r):.1f}" for k, r in series)

    dots = "".join(
        f'<circle cx="{x(k):.1f}" cy="{y(r):.1f}" r="3.5" fill="{color}">'
        f"<title>{label}@{k} = {r:.3f}</title></circle>"
        f'<text x="{x(k):.1f}" y="{y(r) - 8:.1f}" font-size="11" text-anchor="middle">{r:.2f}</text>'
        f'<text x="{x(k):.1f}" y="{height - pad + 16:.1f}" font-size="11" text-anchor="middle">{k}</text>'
        for k, r in points
    )
    earlier_line = (
        f'<polyline fill="none" stroke="#8c959f" stroke-width="1.5" stroke-dasharray="4 3" '
        f'points="{line(before)}"><title>earlier run</title></polyline>'
        if before
        else ""
    )
    return (
        f'<svg role="img" aria-label="{label} at K" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        f'<text x="{width / 2:.0f}" y="16" font-size="13" text-anchor="middle">{label}@K</text>'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#888"/>'
        f'<text x="{pad - 6}" y="{y(1.0) + 4:.1f}" font-size="11" text-anchor="end">1.0</text>'
        f'<text x="{pad - 6}" y="{y(0.0) + 4:.1f}" font-size="11" text-anchor="end">0.0</text>'
        f'<text x="{width / 2:.0f}" y="{height - 6}" font-size="12" text-anchor="middle">K</text>'
        f"{earlier_line}"
        f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{line(points)}"/>{dots}</svg>'
    )


def _curves(by_k: dict[str, dict[str, float]], earlier: dict[str, dict[str, float]] | None) -> str:
    plots = "".join(_curve(by_k, metric, color, earlier) for metric, color in _CURVES)
    legend = "<p class='muted'>Dashed grey: the earlier run.</p>" if earlier else ""
    return f"<div class='plots'>{plots}</div>{legend}"


def _comparison(run: dict[str, Any], earlier: dict[str, Any]) -> str:
    """Summary deltas per metric at every shared K, and the cases that moved at the
    largest shared K (:func:`compare_runs` per metric)."""
    now, then = run["summary"].get("K", {}), earlier["summary"].get("K", {})
    shared = sorted((k for k in now if k in then), key=int)
    head = (
        f"<h2>Compared with <code>{escape(str(earlier['execution_id']))}</code></h2>"
        f"<p>Earlier run created {escape(str(earlier.get('created_at', '')))}; "
        f"{earlier['summary'].get('cases', 0)} answerable cases then, "
        f"{run['summary'].get('cases', 0)} now. Δ = this run − earlier run.</p>"
    )
    if not shared:
        return head + "<p class='miss'>The runs share no cutoff K: nothing to compare.</p>"
    metric_heads = "".join(f"<th>{_LABELS[m]}@K</th><th>earlier</th><th>Δ</th>" for m in METRICS)
    delta_rows = "".join(
        f"<tr><td>{escape(k)}</td>"
        + "".join(
            f"<td class='num'>{_num(now[k][m])}</td><td class='num'>{_num(then[k][m])}</td>"
            + _delta(now[k][m] - then[k][m])
            for m in METRICS
        )
        + "</tr>"
        for k in shared
    )
    top = int(shared[-1])
    changes: dict[str, dict[str, CaseChange]] = {}
    notes: list[str] = []
    for metric in METRICS:
        regressions, improvements, notes = compare_runs(earlier, run, k=top, metric=metric)
        for change in regressions + improvements:
            changes.setdefault(change.case_id, {})[metric] = change
    note_list = "".join(f"<li>{escape(note)}</li>" for note in notes)
    return (
        head
        + (f"<ul class='miss'>{note_list}</ul>" if note_list else "")
        + f"<table><tr><th>K</th>{metric_heads}</tr>{delta_rows}</table>"
        + f"<h3>Cases that changed at K={top}</h3>"
        + _case_changes(run, changes)
    )


def _case_changes(run: dict[str, Any], changes: dict[str, dict[str, CaseChange]]) -> str:
    if not changes:
        return "<p>No case changed on any metric.</p>"
    questions = {case["id"]: case["question"] for case in run["cases"]}

    def direction(moved: dict[str, CaseChange]) -> str:
        signs = {change.after > change.before for change in moved.values()}
        return "mixed" if len(signs) == 2 else "improved" if signs == {True} else "regressed"

    order = {"regressed": 0, "mixed": 1, "improved": 2}
    rows = []
    for case_id, moved in sorted(changes.items(), key=lambda i: (order[direction(i[1])], i[0])):
        status = direction(moved)
        css = {"regressed": "miss", "improved": "ok"}.get(status, "")
        cells = "".join(
            f"<td class='num {'ok' if moved[m].after > moved[m].before else 'miss'}'>"
            f"{moved[m].before:.3f} → {moved[m].after:.3f}</td>"
            if m in moved
            else "<td class='num muted'>=</td>"
            for m in METRICS
        )
        rows.append(
            f"<tr><td>{escape(case_id)}</td><td>{escape(questions.get(case_id, ''))}</td>"
            f"<td class='{css}'>{status}</td>{cells}</tr>"
        )
    heads = "".join(f"<th>{_LABELS[m]}</th>" for m in METRICS)
    return (
        f"<p>{sum(direction(m) == 'regressed' for m in changes.values())} regressed, "
        f"{sum(direction(m) == 'improved' for m in changes.values())} improved, "
        f"{sum(direction(m) == 'mixed' for m in changes.values())} mixed.</p>"
        f"<table><tr><th>Case</th><th>Question</th><th>Change</th>{heads}</tr>"
        f"{''.join(rows)}</table>"
    )


def _evidence(case: dict[str, Any], score_kind: str | None) -> str:
    """The case's ranking: ids, the final score with its kind, every stage's score, the
    grade and the text when the run stored it."""
    ranking = case["ranking"]
    if not ranking:
        return "<p>No evidence retrieved.</p>"
    kind = _SCORE_KINDS.get(score_kind or "", "kind not recorded")
    with_text = any("text" in item for item in ranking)
    rows = []
    for rank, item in enumerate(ranking, 1):
        key = item["key"]
        document = key[0]
        chunk = key[2] if len(key) == 3 else item.get("chunk_id")
        version = f"<br><span class='muted'>{escape(key[1])}</span>" if len(key) == 3 else ""
        stages = "<br>".join(
            f"{_SCORE_KINDS.get(name, escape(name))} {_score(value)}"
            for name, value in item.get("scores", {}).items()
        )
        grade = item["grade"]
        text = ""
        if with_text:  # every item of a run stored with text has it; "–" guards hand-made runs
            shown = escape(item["text"]) if "text" in item else "–"
            text = f"<td><div class='text'>{shown}</div></td>"
        rows.append(
            f"<tr><td class='num'>{rank}</td><td><code>{escape(document)}</code></td>"
            f"<td><code>{escape(chunk or '–')}</code>{version}</td>"
            f"<td class='num'>{_score(item['score'])}</td><td>{stages or '–'}</td>"
            f"<td class='num {'ok' if grade > 0 else 'muted'}'>{grade}</td>{text}</tr>"
        )
    text_head = "<th>Text shown</th>" if with_text else ""
    note = "" if with_text else f"<p class='muted'>{NO_TEXT}</p>"
    return (
        f"{note}<table><tr><th>Rank</th><th>Document</th><th>Chunk</th>"
        f"<th>Score ({escape(kind)})</th><th>Stage scores</th><th>Grade</th>{text_head}</tr>"
        f"{''.join(rows)}</table>"
    )


def _answer(answer: dict[str, Any]) -> str:
    """An answer-run reply: status (anything but ``answered`` is labelled not an answer),
    text, withheld text, citations, references and the answer metrics."""
    status = str(answer.get("status", ""))
    answered = status == "answered"
    badge = (
        "<span class='status ok'>answered</span>"
        if answered
        else f"<span class='status miss'>not an answer: {escape(status)}</span>"
    )
    text = answer.get("text") or ""
    body = (
        f"<blockquote>{escape(text)}</blockquote>"
        if text
        else "<p class='muted'>No text returned.</p>"
    )
    withheld = answer.get("withheld")
    withheld_block = (
        "<details><summary>Withheld text (not shown to the user as an answer)</summary>"
        f"<blockquote>{escape(withheld)}</blockquote></details>"
        if withheld
        else ""
    )
    citations = "".join(
        f"<li><code>{escape(c['label'])}</code> {escape(c['document_id'])} / "
        f"{escape(c['chunk_id'])}"
        + (f" <span class='muted'>({escape(c['location'])})</span>" if c.get("location") else "")
        + "</li>"
        for c in answer.get("citations", [])
    )
    references = "".join(
        f"<li><blockquote>{escape(ref)}</blockquote></li>" for ref in answer.get("references", [])
    )
    gold = answer.get("gold_cited")
    facts = {
        "style": escape(str(answer.get("style", ""))),
        "token F1": _num(answer.get("token_f1")),
        "ROUGE-L": _num(answer.get("rouge_l")),
        "gold evidence cited": "–" if gold is None else "yes" if gold else "no",
        "latency": f"{answer.get('latency_ms', 0.0):.0f} ms",
    }
    return (
        f"<h4>{'Answer' if answered else 'Reply'} {badge}</h4>{body}{withheld_block}"
        f"<dl>{''.join(f'<dt>{name}</dt><dd>{value}</dd>' for name, value in facts.items())}</dl>"
        f"<p><b>Citations</b></p>{f'<ol>{citations}</ol>' if citations else '<p>none</p>'}"
        f"<p><b>Reference</b></p>{f'<ol>{references}</ol>' if references else '<p>none</p>'}"
    )


def _answers_summary(answers: dict[str, Any] | None) -> str:
    if not answers:
        return ""
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td class='num'>{_figure(value)}</td></tr>"
        for name, value in _flattened(answers)
    )
    return f"<h2>Answers</h2><table><tr><th>Measure</th><th>Value</th></tr>{rows}</table>"


def _flattened(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested summary figures as ``(dotted name, value)`` rows, in order."""
    rows: list[tuple[str, Any]] = []
    for name, value in values.items():
        if isinstance(value, dict):
            rows.extend(_flattened(value, f"{prefix}{name}."))
        else:
            rows.append((f"{prefix}{name}", value))
    return rows


def _figure(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.3f}"
    return escape(str(value))


def _case_details(index: int, case: dict[str, Any], ks: list[str], score_kind: str | None) -> str:
    first = next((i for i, item in enumerate(case["ranking"], 1) if item["grade"] > 0), None)
    top = ks[-1]
    ndcg = case["metrics"].get(top, {}).get("ndcg")
    answer = case.get("answer")
    status = (
        ""
        if answer is None
        else f" · <span class='{'ok' if answer.get('status') == 'answered' else 'miss'}'>"
        f"{escape(str(answer.get('status', '')))}</span>"
    )
    return (
        f"<details id='case-{index}'><summary><code>{escape(case['id'])}</code> "
        f"{escape(case['question'])} <span class='muted'>· first relevant rank "
        f"{first or 'none'} · nDCG@{escape(top)} {_num(ndcg)}</span>{status}</summary>"
        f"{_evidence(case, score_kind)}"
        f"{_answer(answer) if answer is not None else ''}</details>"
    )


def render_report(run: dict[str, Any], *, earlier: dict[str, Any] | None = None) -> str:
    """The report for a persisted run record (``RunRecord.to_json()``); ``earlier`` (a
    persisted run too) adds summary deltas, per-case changes and dashed earlier curves."""
    config = run["config"]
    summary = run["summary"]
    ks = [str(k) for k in config["ks"]]
    top = ks[-1]
    score_kind = config.get("score_kind")
    categories = "".join(
        f"<tr><td>{escape(name)}</td><td class='num'>{row['cases']}</td>"
        + "".join(f"<td class='num'>{_num(row['K'][top][m])}</td>" for m in METRICS)
        + "</tr>"
        for name, row in run["categories"].items()
    )
    case_rows = []
    for index, case in enumerate(run["cases"]):
        first = next((i for i, item in enumerate(case["ranking"], 1) if item["grade"] > 0), None)
        cells = "".join(f"<td class='num'>{_num(case['metrics'][k]['ndcg'])}</td>" for k in ks)
        status = "ok" if first else "miss"
        case_rows.append(
            f"<tr><td><a href='#case-{index}'>{escape(case['id'])}</a></td>"
            f"<td>{escape(case['category'])}</td><td>{escape(case['question'])}</td>"
            f"<td class='num {status}'>{first or 'none'}</td>{cells}</tr>"
        )
    details = "".join(
        _case_details(index, case, ks, score_kind) for index, case in enumerate(run["cases"])
    )
    unsupported = run["unsupported"]
    far = unsupported.get("false_acceptance_rate")
    unsupported_rows = "".join(
        f"<tr><td>{escape(row['id'])}</td><td>{escape(row['question'])}</td>"
        f"<td class='num'>{row['results']}</td>"
        f"<td class='{'miss' if row['accepted'] else 'ok'}'>"
        f"{'accepted' if row['accepted'] else 'rejected'}</td>"
        f"<td class='num'>{_num(row['top_score'])}</td></tr>"
        for row in unsupported.get("results", [])
    )
    unsupported_answers = "".join(
        f"<details><summary><code>{escape(row['id'])}</code> {escape(row['question'])}</summary>"
        f"{_answer(row['answer'])}</details>"
        for row in unsupported.get("results", [])
        if row.get("answer") is not None
    )
    ndcg_heads = "".join(f"<th>nDCG@{escape(k)}</th>" for k in ks)
    metric_heads = "".join(f"<th>{_LABELS[m]}@{escape(top)}</th>" for m in METRICS)
    kind = _SCORE_KINDS.get(score_kind or "", "not recorded")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>ragwright evaluation {escape(run["execution_id"])}</title><style>{_STYLE}</style></head>
<body>
<h1>Evaluation <code>{escape(run["execution_id"])}</code></h1>
<p>Created {escape(run["created_at"])}; mode <b>{escape(str(config["mode"]))}</b>;
scores are <b>{escape(kind)}</b>.</p>
<h2>Summary</h2>{_metric_table(summary["K"], summary["cases"])}
{_answers_summary(run.get("answers"))}
{_comparison(run, earlier) if earlier is not None else ""}
<h2>Precision, Recall and nDCG at K</h2>
{_curves(summary["K"], earlier["summary"].get("K") if earlier is not None else None)}
<h2>Per category (K={escape(top)})</h2>
<table><tr><th>Category</th><th>Cases</th>{metric_heads}</tr>{categories}</table>
<h2>Per case</h2>
<table><tr><th>Case</th><th>Category</th><th>Question</th><th>First relevant rank</th>{ndcg_heads}</tr>
{"".join(case_rows)}</table>
<h2>Retrieved evidence per case</h2>
<p>Ranked at the largest K; grade is the case's label (0 = not labelled relevant).</p>
{details}
<h2>Unsupported questions</h2>
<p>{unsupported.get("cases", 0)} unsupported questions, {unsupported.get("accepted", 0)} accepted;
false-acceptance rate <b>{_num(far)}</b> (tracked separately, never averaged into the metrics).</p>
<table><tr><th>Case</th><th>Question</th><th>Results</th><th>Decision</th><th>Top score</th></tr>
{unsupported_rows}</table>
{unsupported_answers}
<details id="configuration"><summary><h2>Configuration</h2></summary>{_definitions(config)}</details>
</body></html>
"""
