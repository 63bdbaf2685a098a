"""Helpers of the converter benchmarks (benchmarks/converters.py, rendered_quality.py).

The benchmarks themselves are not tests; these guard what their figures rest on: the
fidelity score and the deterministic questions generated for the runbooks.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_fidelity_counts_kept_boilerplate_against_precision_and_lost_text_against_recall() -> None:
    bench = _load("converters")
    reference = bench.tokens(
        bench.reference_text("# Title\n\nSee [the docs](https://x.example/a).\n")
    )
    assert reference == ["title", "see", "the", "docs"]  # the link target is not text
    assert bench.fidelity(reference, reference)["f1"] == 1.0
    with_boilerplate = bench.fidelity(["home", "search", *reference], reference)
    assert with_boilerplate["recall"] == 1.0
    assert with_boilerplate["precision"] == 4 / 6
    lost = bench.fidelity(reference[:2], reference)
    assert (lost["precision"], lost["recall"]) == (1.0, 0.5)
    reordered = bench.fidelity(list(reversed(reference)), reference)
    assert reordered["f1"] == 1.0
    assert reordered["order"] < 0.5


def test_runbook_questions_are_the_meaning_sentence_and_the_split_alert_name(
    tmp_path: Path,
) -> None:
    bench = _load("rendered_quality")
    assert bench.split_camel("KubePodCrashLooping") == "Kube Pod Crash Looping"
    assert bench.split_camel("CoreDNSErrorsHigh") == "Core DNS Errors High"
    meaning = (
        "---\ntitle: x\n---\n# Alert\n\n## Meaning\n\n"
        "```\ncode first\n\nstill code in the fence\n```\n\n"
        "The `etcd` member is [unhealthy](https://x.example). More text follows.\n\n"
        "## Impact\n\nNone.\n"
    )
    assert bench.meaning_sentence(meaning) == "The etcd member is unhealthy."
    assert bench.meaning_sentence("# Alert\n\n## Impact\n\nNone at all here.\n") is None
    assert bench.meaning_sentence("# A\n\n## Meaning\n\nToo short.\n") is None
    (tmp_path / "team").mkdir()
    for stem in ("FirstAlert", "SecondAlert"):
        (tmp_path / "team" / f"{stem}.md").write_text(meaning)
    cases = bench.runbook_cases(tmp_path)
    by_category = {}
    for case in cases:
        by_category.setdefault(case["category"], []).append(case)
    # The same sentence in two runbooks is one question with both as relevant.
    [shared] = by_category["meaning"]
    assert [r["document_id"] for r in shared["relevant"]] == ["team/FirstAlert", "team/SecondAlert"]
    assert [c["question"] for c in by_category["alert-name"]] == ["First Alert", "Second Alert"]
    assert [c["id"] for c in cases] == [c["id"] for c in bench.runbook_cases(tmp_path)]


def test_a_copy_further_than_the_tolerance_from_the_markdown_copy_fails_the_check() -> None:
    bench = _load("rendered_quality")

    def copy(ndcg: float, top1: dict[str, str], cases: dict[str, float]) -> dict[str, object]:
        run = {"ndcg@10": ndcg, "top1": top1, "case_ndcg": cases}
        return {"documents": 2, "files": 2, "chunks": 4, "runs": {"hybrid": run}}

    copies = {
        "md": copy(0.99, {"q1": "a", "q2": "b"}, {"q1": 1.0, "q2": 0.98}),
        "pdf": copy(0.95, {"q1": "a", "q2": "c"}, {"q1": 1.0, "q2": 0.9}),
        "docx": copy(0.97, {"q1": "a", "q2": "b"}, {"q1": 1.0, "q2": 0.94}),
        "html": copy(1.0, {"q1": "a", "q2": "b"}, {"q1": 1.0, "q2": 1.0}),
    }
    assert bench.compare_copies("c", copies, ["hybrid"], 0.03) == ["c/pdf/hybrid"]
    pdf = copies["pdf"]["runs"]["hybrid"]
    assert (pdf["diff_to_md"], pdf["top1_same_as_md"], pdf["cases_changed"]) == (-0.04, 0.5, 1)
    assert copies["docx"]["runs"]["hybrid"]["diff_to_md"] == -0.02
    # A copy better by more than the tolerance is as suspect as a worse one.
    copies["html"]["runs"]["hybrid"]["ndcg@10"] = 1.03
    assert bench.compare_copies("c", copies, ["hybrid"], 0.03) == ["c/pdf/hybrid", "c/html/hybrid"]


def test_rendered_samples_keep_each_originals_type_and_state_through_a_rules_file() -> None:
    render = _load("render_corpus")
    rules = render.metadata_rules(
        {
            "worker-shutdown": "---\ndocument_id: worker-shutdown\ndocument_type: runbook\n"
            "publication_state: published\n---\n# Stop\n",
            "notes/backup": "---\ndocument_type: note\npublication_state: draft\n---\n# B\n",
            "bare": "# No front matter\n",
            "unclosed": "---\ndocument_type: note\n# never closed\n",
        }
    )
    assert rules == (
        '[[rules]]\nglob = "notes/backup.*"\ndocument_type = "note"\n'
        'publication_state = "draft"\n\n'
        '[[rules]]\nglob = "worker-shutdown.*"\ndocument_type = "runbook"\n'
        'publication_state = "published"\n'
    )


def test_copies_answers_are_compared_with_the_markdown_copys_text_citations_and_token_f1() -> None:
    bench = _load("rendered_quality")
    assert bench.token_f1("Drain the jobs", "drain the jobs") == 1.0
    assert bench.token_f1("", "") == 1.0
    assert bench.token_f1("", "drain") == 0.0  # a refusal against an answer
    assert bench.token_f1("a b", "c d") == 0.0
    assert bench.token_f1("a b c d", "a b") == 2 * (0.5 * 1.0) / 1.5
    assert bench.answer_text(
        {"answer": "", "quotes": [{"text": "One\n two."}, {"text": "Three."}]}
    ) == ("One two. Three.")
    assert bench.answer_text({"answer": " Said. ", "quotes": [{"text": "x"}]}) == "Said."

    def said(status: str, text: str, cited: list[str]) -> dict[str, object]:
        return {"status": status, "text": text, "cited": cited}

    copies = {
        "md": {"answers": {"q1": said("ok", "a b", ["x"]), "q2": said("ok", "c d", ["y"])}},
        "pdf": {"answers": {"q1": said("ok", "a b", ["x"]), "q2": said("ok", "c e", ["y", "z"])}},
        "html": {"answers": {"q1": said("none", "a b", ["x"]), "q2": said("ok", "c d", ["y"])}},
    }
    summary = bench.compare_answers(copies)
    assert summary["md"] == {
        "questions": 2,
        "same_text": 2,
        "same_cited": 2,
        "mean_f1": 1.0,
        "differ": [],
    }
    assert summary["pdf"] == {
        "questions": 2,
        "same_text": 1,
        "same_cited": 1,
        "mean_f1": 0.75,
        "differ": ["q2"],
    }
    # The same words with another status (answered vs refused) are not the same answer.
    assert (summary["html"]["same_text"], summary["html"]["differ"]) == (1, ["q1"])
