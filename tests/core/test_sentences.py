"""Evidence sentences read as the text is written: hard-wrapped Markdown paragraphs
joined before they are split (the production splitter ends a sentence at every line
break), Markdown syntax left out of what a person reads, order and labels kept."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragwright.core.assembly import Candidate, SelectedSource
from ragwright.core.conditions import conditions_for
from ragwright.core.sentences import evidence_sentences
from ragwright.pipeline.answerability import split_sentences


def source(text: str, label: str = "S1") -> SelectedSource:
    candidate = Candidate("doc", "s/p0", "v1", "s", "Title", "H", f"H\n\n{text}", 1.0)
    return SelectedSource(label, candidate, text)


def read(text: str) -> list[str]:
    return [s.text for s in evidence_sentences([source(text)], split_sentences)]


ARGO = (
    "Argo CD runs Git with the `HOME` environment variable set to\n"
    "`/dev/null`. As a result, global Git configuration is not supported."
)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        pytest.param(
            ARGO,
            [
                "Argo CD runs Git with the `HOME` environment variable set to `/dev/null`.",
                "As a result, global Git configuration is not supported.",
            ],
            id="wrap-before-inline-code",
        ),
        pytest.param(
            "Restart it with `kubectl rollout\nrestart deploy/argocd-server` once. Then wait.",
            ["Restart it with `kubectl rollout restart deploy/argocd-server` once.", "Then wait."],
            id="wrap-inside-inline-code",
        ),
        pytest.param(
            "Start it with `./prometheus\n--config.file=prometheus.yml`, then keep `*.yaml` files\n"
            "in `config/`. It reloads them on SIGHUP.",
            [
                "Start it with `./prometheus --config.file=prometheus.yml`, then keep "
                "`*.yaml` files in `config/`.",
                "It reloads them on SIGHUP.",
            ],
            id="no-boundary-inside-inline-code",
        ),
        pytest.param(
            "Prometheus scrapes metrics from instrumented jobs, either directly or\n"
            "via an intermediary push gateway for short-lived jobs. It stores all\n"
            "scraped samples locally.\n"
            "Grafana can be used to visualize the collected data.",
            [
                "Prometheus scrapes metrics from instrumented jobs, either directly or via "
                "an intermediary push gateway for short-lived jobs.",
                "It stores all scraped samples locally.",
                "Grafana can be used to visualize the collected data.",
            ],
            id="wrap-after-a-word-that-ends-a-sentence",
        ),
        pytest.param(
            "Before you upgrade:\n\n"
            "- back up the `argocd-cm` ConfigMap and the\n"
            "  `argocd-secret` Secret;\n"
            "* read the release notes,\nwhich list breaking changes.\n"
            "1. Scale the controller to zero.\n"
            "2. [x] Apply the new manifests.",
            [
                "Before you upgrade:",
                "back up the `argocd-cm` ConfigMap and the `argocd-secret` Secret;",
                "read the release notes, which list breaking changes.",
                "Scale the controller to zero.",
                "Apply the new manifests.",
            ],
            id="a-list",
        ),
        pytest.param(
            "### Disable admin user\n"
            "Once you create other users, you may want to disable the\n"
            "admin user.\n\n"
            "Local users\n-----------\n\n"
            "Each user needs an account.",
            [
                "Once you create other users, you may want to disable the admin user.",
                "Each user needs an account.",
            ],
            id="a-heading-line",
        ),
        pytest.param(
            "Use the *system* configuration file, as described in\n"
            '[the Git documentation](https://git-scm.com/docs/git-config "git config").\n'
            "It is **not** read by ~~older~~ __all__ releases: see <https://argo-cd.io>,\n"
            "[the FAQ][faq] and [![the diagram](img/flow.png)](img/flow.png), keep\n"
            "`*.yaml`, snake_case_name and 2*3*4 as written, and read \\*escaped\\* stars\n"
            "as stars.",
            [
                "Use the system configuration file, as described in the Git documentation.",
                "It is not read by older all releases: see https://argo-cd.io, the FAQ and "
                "the diagram, keep `*.yaml`, snake_case_name and 2*3*4 as written, and read "
                "*escaped* stars as stars.",
            ],
            id="emphasis-and-links",
        ),
        pytest.param(
            "> Quoted text that\n> wraps in a block quote.\n>\n> ```\n> > a prompt\n> ```\n"
            "> A second paragraph\nwrapped lazily.",
            [
                "Quoted text that wraps in a block quote.",
                "> a prompt",
                "A second paragraph wrapped lazily.",
            ],
            id="a-block-quote",
        ),
        pytest.param(
            '```yaml\ndata:\n  # not a heading\n\n  admin.enabled: "false"\n```\n\n'
            "    argocd login cd.argoproj.io\n    argocd account list",
            [
                "data:",
                "# not a heading",
                'admin.enabled: "false"',
                "argocd login cd.argoproj.io",
                "argocd account list",
            ],
            id="code-lines-verbatim-never-joined",
        ),
        pytest.param(
            "| Flag | Meaning |\n|------|:-------|\n| `--insecure` | **No** TLS\\|plain |",
            ["Flag | Meaning", "`--insecure` | No TLS|plain"],
            id="a-table",
        ),
        pytest.param(
            "Keep the line  \nbreak and this one\\\nas spaces.\n\n[faq]: https://argo-cd.io/faq",
            ["Keep the line break and this one as spaces."],
            id="hard-breaks-and-a-link-definition",
        ),
    ],
)
def test_sentences_read_the_text_as_written(text: str, sentences: list[str]) -> None:
    assert read(text) == sentences


def test_labels_and_paragraphs_follow_the_reading_order_of_the_joined_text() -> None:
    text = (
        "### Timeouts\n"
        "Drain the remaining jobs only while the shutdown deadline\n"
        "allows it. If the deadline expires, cancel the in-flight\n"
        "I/O.\n\n"
        "Log the result."
    )
    sentences = evidence_sentences([source(text), source(ARGO, "S2")], split_sentences)
    assert [(s.label, s.paragraph, s.text) for s in sentences] == [
        ("S1.1", 1, "Drain the remaining jobs only while the shutdown deadline allows it."),
        ("S1.2", 1, "If the deadline expires, cancel the in-flight I/O."),
        ("S1.3", 2, "Log the result."),
        (
            "S2.1",
            1,
            "Argo CD runs Git with the `HOME` environment variable set to `/dev/null`.",
        ),
        ("S2.2", 1, "As a result, global Git configuration is not supported."),
    ]
    # The condition on the next (wrapped) line is in the same paragraph: it goes with
    # the rule it governs.
    assert [c.label for c in conditions_for([sentences[0]], sentences)] == ["S1.2"]


WORDS = st.sampled_from(
    ["the", "jobs", "drain", "`HOME`", "`/dev/null`", "deadline", "set", "to", "e.g.", "2.5"]
)
PROSE = st.lists(
    st.tuples(st.lists(WORDS, min_size=1, max_size=12), st.sampled_from([".", "!", "?"])),
    min_size=1,
    max_size=5,
).map(lambda parts: " ".join(" ".join(words).capitalize() + end for words, end in parts))


@settings(max_examples=60, deadline=None)
@given(PROSE, st.integers(min_value=8, max_value=80))
def test_wrapping_a_paragraph_at_any_width_changes_none_of_its_sentences(
    prose: str, width: int
) -> None:
    wrapped = "\n".join(textwrap.wrap(prose, width, break_long_words=False))
    assert read(wrapped) == read(prose)
