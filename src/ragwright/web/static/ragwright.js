// The ask page: reads POST /ui/ask, the same answer stream as POST /v1/answers/stream,
// with fetch() (EventSource can neither POST nor send the CSRF header). Every text that
// comes from documents, the model or the question is set with textContent, never as HTML.
// The conversation lives in this tab's memory only; nothing of it is stored by the server.

const words = JSON.parse(document.getElementById("words").textContent);
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const form = document.getElementById("ask-form");
const question = document.getElementById("question");
const askButton = document.getElementById("ask");
const askError = document.getElementById("ask-error");
const conversation = document.getElementById("conversation");
const passagePanel = document.getElementById("passage");

// Earlier answered turns, oldest first, as the API's `history` takes them.
let history = [];
let lastOpener = null;

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function shortRevision(revision) {
  return revision ? String(revision).replace(/^sha256:/, "").slice(0, 12) : "";
}

function passageLink(source, quotes) {
  const params = new URLSearchParams({ document_id: source.document_id, chunk_id: source.chunk_id });
  const link = element("a", "cite", `${source.label} · ${source.document_id}`);
  link.href = `/ui/passages?${params}`;
  if (source.page !== undefined && source.page !== null) link.append(`, page ${source.page}`);
  link.addEventListener("click", (event) => {
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    openPassage(link, source, quotes(source.label));
  });
  return link;
}

function newTurn(text) {
  const turn = element("article", "turn card");
  turn.setAttribute("aria-busy", "true");
  turn.append(element("h2", "question", text));
  const state = element("p", "state", "Finding evidence…");
  state.setAttribute("role", "status");
  // Every part has its place (and height) from the start, so nothing moves as the
  // stream fills it; the evidence list opens on request.
  const evidence = element("details", "evidence");
  const summary = element("summary", null, "Evidence: finding…");
  const evidenceList = element("ol", "sources");
  evidence.append(summary, evidenceList);
  const answer = element("div", "answer");
  const mode = element("p", "mode");
  const reason = element("p", "reason");
  const model = element("p", "model");
  const searched = element("p", "searched");
  const citations = element("div", "citations");
  citations.append(element("h3", null, "Citations"));
  turn.append(state, evidence, answer, mode, reason, model, searched, citations);
  conversation.append(turn);
  turn.scrollIntoView({ block: "nearest" });
  return { turn, state, evidence, summary, evidenceList, answer, mode, reason, model, searched,
    citations, quotes: [], outcome: null, problem: null, sources: [] };
}

function quotesFor(view) {
  return (label) => view.quotes.filter((q) => q.source === label).map((q) => q.text);
}

function showEvidence(view, data) {
  view.sources = data.sources || [];
  view.summary.textContent = `Evidence: ${view.sources.length} passage${view.sources.length === 1 ? "" : "s"}`;
  for (const source of view.sources) {
    const item = element("li");
    item.append(passageLink(source, quotesFor(view)));
    view.evidenceList.append(item);
  }
  view.state.textContent = "Evidence found; waiting for the answer…";
}

function showCitations(view, data) {
  const citations = data.citations || [];
  view.citations.replaceChildren(element("h3", null, citations.length ? "Citations" : "No citations"));
  const list = element("ul");
  for (const citation of citations) {
    const item = element("li");
    item.append(passageLink(citation, quotesFor(view)));
    list.append(item);
  }
  view.citations.append(list);
}

function unavailableWithReason(outcome) {
  // The service refused to answer for a known reason (the model, the deadline): that is
  // "Unavailable", even after the evidence was shown; a cut without reason is "Interrupted".
  return outcome.mode === "unavailable" && Boolean(outcome.reason);
}

function modeWords(outcome) {
  if (unavailableWithReason(outcome)) return words.modes.unavailable;
  if (outcome.interrupted) return words.modes.interrupted;
  if (outcome.mode === "generated") {
    return outcome.style === "quoted" ? words.modes.quoted : words.modes.generated;
  }
  if (outcome.mode === "previous_draft") {
    return words.modes.previous_draft.replace("{age}", age((outcome.draft || {}).age_seconds || 0));
  }
  return words.modes[outcome.mode] || String(outcome.mode);
}

function age(seconds) {
  const minutes = Math.floor(seconds / 60);
  if (minutes < 1) return "less than a minute";
  if (minutes < 120) return minutes === 1 ? "1 minute" : `${minutes} minutes`;
  return `${Math.floor(minutes / 60)} hours`;
}

function reasonWords(reason) {
  if (!reason) return "";
  return words.reasons[reason] || String(reason).replaceAll("_", " ");
}

function showOutcome(view, outcome) {
  view.outcome = outcome;
  view.quotes = outcome.quotes || [];
  const plain = outcome.mode === "generated" && !outcome.interrupted;
  view.mode.textContent = modeWords(outcome);
  const shown = outcome.interrupted && !unavailableWithReason(outcome) ? "interrupted" : String(outcome.mode);
  view.mode.className = `mode mode-${shown}`;
  view.turn.dataset.mode = shown;
  const why = [];
  if (outcome.reason) why.push(`Why: ${reasonWords(outcome.reason)}.`);
  if (outcome.interrupted && view.problem) why.push(view.problem.detail || view.problem.title);
  view.reason.textContent = why.join(" ");
  const provenance = outcome.provenance || {};
  view.model.textContent = provenance.model
    ? `Model: ${provenance.model}${provenance.provider ? ` (${provenance.provider})` : ""}`
    : "Model: none answered";
  // The types and states searched, in the answer's own words (`searched.note`).
  const note = (outcome.searched || {}).note;
  view.searched.textContent = note ? `${note.charAt(0).toUpperCase()}${note.slice(1)}.` : "";
  if (!plain) {
    // Nothing streamed as an answer: show what there is, labelled by the mode above.
    view.answer.replaceChildren();
    if (outcome.mode === "approved_template" && outcome.template) {
      view.answer.append(element("p", null, outcome.template.text));
    } else if (outcome.mode === "evidence_only" && view.quotes.length) {
      const list = element("ul", "evidence-sentences");
      for (const quote of view.quotes) list.append(element("li", null, `${quote.text} [${quote.source}]`));
      view.answer.append(list);
    } else if (outcome.answer && !outcome.interrupted) {
      view.answer.append(element("p", null, outcome.answer));
    }
  }
  view.answer.classList.toggle("not-an-answer", !plain);
  view.state.textContent = outcome.interrupted ? "The answer stopped." : "Done.";
  if (plain && outcome.answer) {
    history.push({ role: "user", content: view.question }, { role: "assistant", content: outcome.answer });
    history = history.slice(-32);
  }
}

function showFailure(view, status, problem) {
  view.turn.dataset.mode = "failed";
  view.mode.className = "mode mode-unavailable";
  if (status === 401) {
    view.mode.textContent = "You are signed out";
    view.reason.textContent = "The session ended or the key was revoked. Reload the page to sign in.";
  } else if (problem && problem.mode) {
    // An answer refused as such (503 answer-unavailable): its mode and reason in words.
    view.mode.textContent = modeWords({ mode: problem.mode, reason: problem.reason });
    view.reason.textContent = problem.reason ? `Why: ${reasonWords(problem.reason)}.` : problem.detail || "";
  } else {
    view.mode.textContent = (problem && problem.title) || `Refused (${status})`;
    view.reason.textContent = (problem && problem.detail) || "";
  }
  view.state.textContent = "No answer.";
}

function parseEvent(block) {
  let name = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!name) return null;
  return { name, data: JSON.parse(data.join("\n")) };
}

function handle(view, event) {
  if (event.name === "evidence") showEvidence(view, event.data);
  else if (event.name === "delta") {
    view.state.textContent = "Answering…";
    view.answer.append(document.createTextNode(event.data.text));
  } else if (event.name === "citations") showCitations(view, event.data);
  else if (event.name === "error") view.problem = event.data;
  else if (event.name === "outcome") showOutcome(view, event.data);
}

async function ask(text) {
  const view = newTurn(text);
  view.question = text;
  askButton.disabled = true;
  form.setAttribute("aria-busy", "true");
  try {
    const response = await fetch("/ui/ask", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRF-Token": csrf },
      body: JSON.stringify({ question: text, history }),
    });
    if (!response.ok) {
      showFailure(view, response.status, await response.json().catch(() => null));
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replaceAll("\r\n", "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parseEvent(block);
        if (event) handle(view, event);
      }
    }
  } catch (error) {
    view.problem = { title: "Connection lost", detail: "the connection closed before the answer finished" };
  } finally {
    if (!view.outcome && view.turn.dataset.mode !== "failed") {
      // The stream ended without its outcome: never shown as an answer.
      if (!view.problem) view.problem = { detail: "the stream ended before the answer finished" };
      showOutcome(view, { mode: "unavailable", reason: null, interrupted: true, quotes: [] });
    }
    view.turn.setAttribute("aria-busy", "false");
    askButton.disabled = false;
    form.removeAttribute("aria-busy");
  }
}

function highlight(container, text, sentences) {
  // Marks each quoted sentence inside the passage, building text nodes only.
  const ranges = [];
  for (const sentence of sentences) {
    const at = text.indexOf(sentence);
    if (at >= 0) ranges.push([at, at + sentence.length]);
  }
  ranges.sort((a, b) => a[0] - b[0]);
  let at = 0;
  container.replaceChildren();
  for (const [start, end] of ranges) {
    if (start < at) continue;
    container.append(document.createTextNode(text.slice(at, start)));
    container.append(element("mark", null, text.slice(start, end)));
    at = end;
  }
  container.append(document.createTextNode(text.slice(at)));
}

async function openPassage(opener, source, sentences) {
  lastOpener = opener;
  const params = new URLSearchParams({ document_id: source.document_id, chunk_id: source.chunk_id });
  const response = await fetch(`/ui/passages?${params}`, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  });
  const body = await response.json().catch(() => null);
  const text = document.getElementById("passage-text");
  if (!response.ok || !body) {
    document.getElementById("passage-document").textContent = source.document_id;
    document.getElementById("passage-section").textContent = "";
    document.getElementById("passage-revision").textContent = "";
    text.textContent = (body && body.detail) || `The passage could not be opened (${response.status}).`;
  } else {
    document.getElementById("passage-document").textContent = `${body.title} (${body.document_id})`;
    document.getElementById("passage-section").textContent = body.section;
    document.getElementById("passage-revision").textContent = shortRevision(body.revision);
    document.getElementById("passage-revision").title = body.revision;
    const page = body.page ?? source.page;
    for (const node of passagePanel.querySelectorAll(".page-field")) node.hidden = page === undefined || page === null;
    document.getElementById("passage-page").textContent = page ?? "";
    highlight(text, body.text, sentences);
  }
  passagePanel.hidden = false;
  passagePanel.focus();
}

document.getElementById("passage-close").addEventListener("click", () => {
  passagePanel.hidden = true;
  if (lastOpener) lastOpener.focus();
});

passagePanel.addEventListener("keydown", (event) => {
  if (event.key === "Escape") document.getElementById("passage-close").click();
});

document.getElementById("new-conversation").addEventListener("click", () => {
  history = [];
  conversation.replaceChildren();
  passagePanel.hidden = true;
  question.value = "";
  question.focus();
});

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = question.value.trim();
  if (!text) {
    askError.textContent = "question: type a question first.";
    askError.hidden = false;
    question.focus();
    return;
  }
  askError.hidden = true;
  if (askButton.disabled) return;
  question.value = "";
  ask(text);
});

question.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    form.requestSubmit();
  }
});

// The field and the button start disabled in the HTML: a question typed before this script
// attached its handlers would be lost (Enter would only add a new line).
question.disabled = false;
askButton.disabled = false;
