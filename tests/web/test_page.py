"""The page end to end in Chromium: signing in and out, asking (every mode a person can
meet), citations, tenants, CSRF and the cookie's flags."""

from __future__ import annotations

import json

from playwright.sync_api import Page, Route, expect

from ragwright.application import AddKeyRequest
from tests.web.conftest import DRAIN, Site, ask, sign_in


def answer_with_stream(page: Page, body: str) -> None:
    """The page's next answers come as ``body``, a scripted Server-Sent Events stream."""
    page.route(
        "**/ui/ask",
        lambda route: route.fulfill(
            status=200, headers={"content-type": "text/event-stream"}, body=body
        ),
    )


def test_the_drain_question_streams_an_answer_with_its_deadline_and_a_working_citation(
    page: Page, site: Site
) -> None:
    site.model.behaviour = "answer"
    sign_in(page, site)
    turn = ask(page, DRAIN)
    expect(turn.locator(".mode")).to_have_text("Answered")
    expect(turn.locator(".answer")).to_contain_text("only while the shutdown deadline allows it")
    expect(turn.locator(".model")).to_have_text("Model: switchable-model (switchable)")
    assert turn.locator(".sources li").count() >= 1
    citation = turn.locator(".citations a").first
    expect(citation).to_contain_text("worker-shutdown")
    citation.click()
    panel = page.locator("#passage")
    expect(panel).to_be_visible()
    expect(panel.locator("#passage-document")).to_contain_text("Stop a background worker cleanly")
    expect(panel.locator("#passage-section")).to_have_text("Shutdown and the queue")
    expect(panel.locator("#passage-text")).to_contain_text("completes the channel writer")
    expect(panel.locator("#passage-revision")).not_to_be_empty()
    # The same link opened as a page of its own (a new tab) is a plain page.
    href = citation.get_attribute("href")
    assert href is not None
    page.goto(site.url + href)
    expect(page.get_by_role("heading", level=1)).to_have_text("Stop a background worker cleanly")
    expect(page.locator("blockquote")).to_contain_text("completes the channel writer")


def test_the_question_field_waits_for_the_script_so_no_question_is_lost(
    page: Page, site: Site
) -> None:
    """Enter pressed before the page's script attached its handlers only added a new line:
    the field and the button stay disabled until the script can take the question."""
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route("**/ui/static/ragwright.js", hold)
    sign_in(page, site)
    expect(page.get_by_label("Your question")).to_be_disabled()
    expect(page.get_by_role("button", name="Ask")).to_be_disabled()
    for route in held:
        route.continue_()
    page.unroute("**/ui/static/ragwright.js", hold)
    turn = ask(page, DRAIN)
    expect(turn.locator(".mode")).to_have_text("Answered")


def test_an_unanswerable_question_is_shown_as_not_answered_with_its_reason(
    page: Page, site: Site
) -> None:
    site.model.behaviour = "insufficient"
    sign_in(page, site)
    turn = ask(page, "How do I rotate the database password?")
    expect(turn.locator(".mode")).to_have_text("The evidence does not answer this")
    expect(turn.locator(".reason")).to_contain_text("do not answer the question")
    expect(turn.locator(".answer")).to_have_class("answer not-an-answer")


def test_evidence_only_is_labelled_not_an_answer_while_the_model_is_down(
    page: Page, site: Site
) -> None:
    site.model.behaviour = "down"
    sign_in(page, site)
    turn = ask(page, "What happens to unfinished jobs when the shutdown deadline expires?")
    expect(turn.locator(".mode")).to_have_text("Evidence only — NOT AN ANSWER")
    expect(turn.locator(".reason")).to_contain_text("the model is unavailable")
    expect(turn.locator(".model")).to_have_text("Model: none answered")
    assert turn.locator(".evidence-sentences li").count() >= 1


def test_a_stream_that_fails_after_its_evidence_is_shown_as_interrupted(
    page: Page, site: Site
) -> None:
    site.model.behaviour = "crash"
    sign_in(page, site)
    # A question asked nowhere else: a cached answer would not reach the model.
    turn = ask(page, "Which calls should get the deadline's cancellation token?")
    expect(turn.locator(".mode")).to_have_text("Interrupted — the answer did not finish")
    expect(turn.locator(".answer")).to_have_text("")
    assert turn.locator(".sources li").count() >= 1  # the evidence came first


def test_a_stream_cut_before_its_outcome_is_shown_as_interrupted_not_as_an_answer(
    page: Page, site: Site
) -> None:
    # The connection drops mid-answer: evidence and a first piece, then nothing.
    partial = (
        'event: evidence\ndata: {"policy": "p", "sources": []}\n\n'
        'event: delta\ndata: {"text": "Drain the remaining jobs "}\n\n'
    )
    sign_in(page, site)
    answer_with_stream(page, partial)
    turn = ask(page, DRAIN)
    expect(turn.locator(".mode")).to_have_text("Interrupted — the answer did not finish")
    expect(turn.locator(".reason")).to_contain_text("ended before the answer finished")


def test_each_turn_says_which_types_and_states_were_searched(page: Page, site: Site) -> None:
    sign_in(page, site)
    turn = ask(page, DRAIN)
    expect(turn.locator(".searched")).to_have_text(
        "Searched published runbook documents (the default eligibility); draft documents "
        "and documents of other types were not searched."
    )


def test_a_keys_granted_types_are_the_ones_the_turn_names(page: Page, site: Site) -> None:
    if "acme-notes" not in site.secrets:
        added = site.application.add_key(
            AddKeyRequest(
                tenant="acme", scopes=("answer",), types=("runbook", "note"), name="acme-notes"
            )
        )
        site.secrets["acme-notes"] = added.secret
    sign_in(page, site, "acme-notes")
    turn = ask(page, DRAIN)
    expect(turn.locator(".searched")).to_have_text(
        "Searched published runbook and note documents (types from this key's grant, "
        "state by default); draft documents and documents of other types were not searched."
    )


def test_a_follow_up_sends_the_conversation_and_new_conversation_forgets_it(
    page: Page, site: Site
) -> None:
    site.model.behaviour = "answer"
    sign_in(page, site)
    sent: list[dict[str, object]] = []
    page.on(
        "request",
        lambda request: (
            sent.append(request.post_data_json) if request.url.endswith("/ui/ask") else None
        ),
    )
    ask(page, DRAIN)
    ask(page, "And what if the deadline expires?")
    assert sent[1]["history"] == [
        {"role": "user", "content": DRAIN},
        {"role": "assistant", "content": sent_answer(page)},
    ]
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator("article.turn")).to_have_count(0)
    ask(page, DRAIN)
    assert sent[2]["history"] == []


def sent_answer(page: Page) -> str:
    return page.locator("article.turn .answer").first.inner_text()


def test_a_previous_draft_is_labelled_with_its_age_while_the_model_is_down(
    page: Page, site: Site
) -> None:
    question = "What does the worker stop taking when the host signals shutdown?"
    sign_in(page, site)
    expect(ask(page, question).locator(".mode")).to_have_text("Answered")
    page.get_by_role("button", name="New conversation").click()  # drafts need no history
    site.model.behaviour = "down"
    turn = ask(page, question)
    expect(turn.locator(".mode")).to_have_text("Previous draft, less than a minute old")
    expect(turn.locator(".reason")).to_contain_text("the model is unavailable")
    expect(turn.locator(".answer")).to_contain_text("shutdown deadline allows it")


def test_an_answer_refused_as_unavailable_says_so_and_why(page: Page, site: Site) -> None:
    # The service's 503 answer-unavailable (evidence-only answers turned off and the
    # model down), as the page receives it.
    problem = {
        "type": "/problems/answer-unavailable",
        "title": "No answer can be given now",
        "status": 503,
        "detail": "the model failed (transient)",
        "mode": "unavailable",
        "reason": "model_unavailable",
    }
    sign_in(page, site)
    page.route(
        "**/ui/ask",
        lambda route: route.fulfill(
            status=503, content_type="application/problem+json", body=json.dumps(problem)
        ),
    )
    turn = ask(page, DRAIN)
    expect(turn.locator(".mode")).to_have_text("Unavailable")
    expect(turn.locator(".reason")).to_have_text("Why: the model is unavailable.")


def test_an_unavailable_outcome_after_the_evidence_is_unavailable_not_interrupted(
    page: Page, site: Site
) -> None:
    outcome = {"mode": "unavailable", "reason": "model_unavailable", "interrupted": True}
    stream = (
        'event: evidence\ndata: {"policy": "p", "sources": []}\n\n'
        'event: error\ndata: {"title": "No answer can be given now", "status": 503}\n\n'
        f"event: outcome\ndata: {json.dumps(outcome)}\n\n"
    )
    sign_in(page, site)
    answer_with_stream(page, stream)
    turn = ask(page, DRAIN)
    expect(turn.locator(".mode")).to_have_text("Unavailable")
    expect(turn.locator(".reason")).to_contain_text("Why: the model is unavailable.")


def test_a_citation_that_carries_a_page_shows_it_in_the_link_and_the_passage(
    page: Page, site: Site
) -> None:
    # Paged sources cite a page: the page shows it wherever the citation appears.
    citation = {
        "label": "S1",
        "document_id": "worker-shutdown",
        "chunk_id": "shutdown-and-the-queue/p0",
        "chunking_version": "section-paragraphs-80w-overlap1-v1",
        "revision": "sha256:0",
        "page": 3,
    }
    outcome = {"mode": "generated", "reason": None, "answer": "Drain.", "interrupted": False}
    stream = (
        f"event: citations\ndata: {json.dumps({'citations': [citation]})}\n\n"
        f"event: outcome\ndata: {json.dumps(outcome)}\n\n"
    )
    sign_in(page, site)
    answer_with_stream(page, stream)
    turn = ask(page, DRAIN)
    link = turn.locator(".citations a")
    expect(link).to_have_text("S1 · worker-shutdown, page 3")
    link.click()
    expect(page.locator("#passage-page")).to_have_text("3")
    expect(page.locator("#passage-page")).to_be_visible()


def test_a_quoted_answers_sentences_are_highlighted_in_the_cited_passage(
    page: Page, site: Site
) -> None:
    # The embedded model's quoted style, as the stream carries it.
    sentence = "Drain the remaining jobs only while the shutdown deadline allows it."
    citation = {
        "label": "S1",
        "document_id": "worker-shutdown",
        "chunk_id": "shutdown-and-the-queue/p0",
        "chunking_version": "section-paragraphs-80w-overlap1-v1",
        "revision": "sha256:0",
    }
    outcome = {
        "mode": "generated",
        "style": "quoted",
        "reason": None,
        "answer": sentence,
        "quotes": [{"id": "S1.3", "source": "S1", "text": sentence}],
        "provenance": {"model": "qwen2.5-coder-0.5b-instruct-q4_k_m", "provider": "local"},
        "interrupted": False,
    }
    stream = (
        f"event: delta\ndata: {json.dumps({'text': sentence, 'quote': 'S1.3'})}\n\n"
        f"event: citations\ndata: {json.dumps({'citations': [citation]})}\n\n"
        f"event: outcome\ndata: {json.dumps(outcome)}\n\n"
    )
    sign_in(page, site)
    answer_with_stream(page, stream)
    turn = ask(page, DRAIN)
    expect(turn.locator(".mode")).to_have_text("Quoted from the evidence")
    expect(turn.locator(".model")).to_have_text("Model: qwen2.5-coder-0.5b-instruct-q4_k_m (local)")
    turn.locator(".citations a").click()
    expect(page.locator("#passage-text mark")).to_have_text([sentence])
    expect(page.locator("#passage-text")).to_contain_text("completes the channel writer")


def test_markup_in_an_answer_or_the_evidence_is_shown_as_text_never_run(
    page: Page, site: Site
) -> None:
    markup = '<img id="injected" src="x" onerror="window.__ran = 1">'
    outcome = {
        "mode": "evidence_only",
        "reason": "model_unavailable",
        "answer": "",
        "quotes": [{"id": "S1.1", "source": "S1", "text": markup}],
        "interrupted": False,
    }
    stream = (
        f"event: evidence\ndata: {json.dumps({'sources': []})}\n\n"
        f"event: outcome\ndata: {json.dumps(outcome)}\n\n"
    )
    sign_in(page, site)
    answer_with_stream(page, stream)
    turn = ask(page, markup)
    expect(turn.locator(".question")).to_have_text(markup)
    expect(turn.locator(".evidence-sentences")).to_contain_text(markup)
    expect(page.locator("#injected")).to_have_count(0)
    assert page.evaluate("window.__ran") is None
