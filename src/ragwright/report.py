"""A self-contained HTML report of an evaluation run (no scripts, no external assets).

Sections: run configuration, summary per K, per-category table, recall@K curve (inline
SVG), per-case table, unsupported-question outcomes. Question texts are shown (they are
the evaluator's own labels); chunk texts appear only when the run stored them.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ragwright.pipeline.evaluate import METRICS

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1b1f24}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;width:100%}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.miss{color:#b42318}.ok{color:#067647}code{font-size:.9em}
dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{font-weight:600}
"""
_LABELS = {"precision": "Precision", "recall": "Recall", "reciprocal_rank": "RR", "ndcg": "nDCG"}


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _metric_table(by_k: dict[str, dict[str, float]], cases: int) -> str:
    head = "".join(f"<th>{_LABELS[m]}@K</th>" for m in METRICS)
    rows = "".join(
        f"<tr><td>{escape(k)}</td>"
        + "".join(f'<td class="num">{_num(values[m])}</td>' for m in METRICS)
        + "</tr>"
        for k, values in by_k.items()
    )
    return f"<p>{cases} answerable cases, macro-averaged.</p><table><tr><th>K</th>{head}</tr>{rows}</table>"


def _recall_curve(by_k: dict[str, dict[str, float]]) -> str:
    points = [(int(k), v["recall"]) for k, v in by_k.items()]
    if not points:
        return ""
    width, height, pad = 520, 240, 40
    max_k = max(k for k, _ in points)

    def x(k: int) -> float:
        return pad + (width - 2 * pad) * (k / max_k if max_k else 0)

    def y(r: float) -> float:
        return height - pad - (height - 2 * pad) * r

    line = " ".join(f"{x(k):.1f},{y(r):.1f}" for k, r in points)
    dots = "".join(
        f'<circle cx="{x(k):.1f}" cy="{y(r):.1f}" r="3.5" fill="#0969da">'
        f"<title>Recall@{k} = {r:.3f}</title></circle>"
        f'<text x="{x(k):.1f}" y="{y(r) - 8:.1f}" font-size="11" text-anchor="middle">{r:.2f}</text>'
        f'<text x="{x(k):.1f}" y="{height - pad + 16:.1f}" font-size="11" text-anchor="middle">{k}</text>'
        for k, r in points
    )
    return (
        f'<svg role="img" aria-label="Recall at K" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#888"/>'
        f'<text x="{pad - 6}" y="{y(1.0) + 4:.1f}" font-size="11" text-anchor="end">1.0</text>'
        f'<text x="{pad - 6}" y="{y(0.0) + 4:.1f}" font-size="11" text-anchor="end">0.0</text>'
        f'<text x="{width / 2:.0f}" y="{height - 6}" font-size="12" text-anchor="middle">K</text>'
        f'<polyline fill="none" stroke="#0969da" stroke-width="2" points="{line}"/>{dots}</svg>'
    )


def render_report(run: dict[str, Any]) -> str:
    """The report for a persisted run record (``RunRecord.to_json()``)."""
    config = run["config"]
    summary = run["summary"]
    ks = [str(k) for k in config["ks"]]
    top = ks[-1]
    config_rows = "".join(
        f"<dt>{escape(str(name))}</dt><dd><code>{escape(str(value))}</code></dd>"
        for name, value in config.items()
    )
    categories = "".join(
        f"<tr><td>{escape(name)}</td><td class='num'>{row['cases']}</td>"
        + "".join(f"<td class='num'>{_num(row['K'][top][m])}</td>" for m in METRICS)
        + "</tr>"
        for name, row in run["categories"].items()
    )
    case_rows = []
    for case in run["cases"]:
        first = next((i for i, item in enumerate(case["ranking"], 1) if item["grade"] > 0), None)
        cells = "".join(f"<td class='num'>{_num(case['metrics'][k]['ndcg'])}</td>" for k in ks)
        status = "ok" if first else "miss"
        case_rows.append(
            f"<tr><td>{escape(case['id'])}</td><td>{escape(case['category'])}</td>"
            f"<td>{escape(case['question'])}</td>"
            f"<td class='num {status}'>{first or 'none'}</td>{cells}</tr>"
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
    ndcg_heads = "".join(f"<th>nDCG@{escape(k)}</th>" for k in ks)
    metric_heads = "".join(f"<th>{_LABELS[m]}@{escape(top)}</th>" for m in METRICS)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>ragwright evaluation {escape(run["execution_id"])}</title><style>{_STYLE}</style></head>
<body>
<h1>Evaluation <code>{escape(run["execution_id"])}</code></h1>
<p>Created {escape(run["created_at"])}; mode <b>{escape(str(config["mode"]))}</b>.</p>
<h2>Configuration</h2><dl>{config_rows}</dl>
<h2>Summary</h2>{_metric_table(summary["K"], summary["cases"])}
<h2>Recall@K</h2>{_recall_curve(summary["K"])}
<h2>Per category (K={escape(top)})</h2>
<table><tr><th>Category</th><th>Cases</th>{metric_heads}</tr>{categories}</table>
<h2>Per case</h2>
<table><tr><th>Case</th><th>Category</th><th>Question</th><th>First relevant rank</th>{ndcg_heads}</tr>
{"".join(case_rows)}</table>
<h2>Unsupported questions</h2>
<p>{unsupported.get("cases", 0)} unsupported questions, {unsupported.get("accepted", 0)} accepted;
false-acceptance rate <b>{_num(far)}</b> (tracked separately, never averaged into the metrics).</p>
<table><tr><th>Case</th><th>Question</th><th>Results</th><th>Decision</th><th>Top score</th></tr>
{unsupported_rows}</table>
</body></html>
"""
