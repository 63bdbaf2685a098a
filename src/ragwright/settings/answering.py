"""Settings groups for answering and serving: chat, answers, service, jobs, telemetry."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import SecretStr, field_validator

from ragwright.settings.base import Group, setting
from ragwright.settings.fallback import ChatFallback, ChatProviderKind


class ChatSettings(Group):
    """The chat model: provider, limits, retries, capacity, cache and fallbacks."""

    provider: ChatProviderKind = setting(
        "local",
        "`local` (bundled Qwen2.5-Coder-0.5B), `openai`, `azure-openai`, `ollama`",
    )
    model: str = setting(
        "",
        "model, or Azure deployment name (remote providers)",
        shown="—",
    )
    base_url: str | None = setting(
        None,
        "OpenAI-compatible base URL, Azure resource endpoint, or Ollama URL",
    )
    api_key: SecretStr | None = setting(
        None,
        "API key (remote providers)",
    )
    max_messages: int = setting(
        32,
        "message guard: messages per request",
        gt=0,
    )
    max_input_tokens: int = setting(
        6000,
        "message guard: o200k_base input tokens per request",
        gt=0,
    )
    max_attempts: int = setting(
        3,
        "provider attempts per operation across retries and alternates",
        gt=0,
    )
    retries: int = setting(
        2,
        "attempts inside the retry layer",
        gt=0,
    )
    capacity: int = setting(
        2,
        "concurrent model attempts per provider's capacity pool (shared across processes through "
        "Redis; see [operations.md](operations.md#model-capacity-across-processes))",
        gt=0,
    )
    throttle_cooldown: float = setting(
        5.0,
        "seconds a provider's capacity pool refuses every attempt, in every process, after the "
        "provider throttled (429) without saying how long; a `Retry-After` it gave is used "
        "instead; either is capped at 60 (range: above 0, at most 60)",
        gt=0,
        le=60,
    )
    cache_ttl: float = setting(
        300.0,
        "response cache time to live, seconds",
        gt=0,
    )
    cache_max_entries: int = setting(
        1024,
        "in-process response cache: entries kept; the least recently used is evicted past it "
        "(Redis bounds its own memory)",
        gt=0,
    )
    temperature: float | None = setting(
        0.0,
        "answer sampling temperature (0 = greedy, repeatable); `provider` leaves it unset",
        ge=0.0,
        le=2.0,
    )
    keep_warm: float = setting(
        600.0,
        "seconds the local model's background process stays after a command last used it "
        "(`ragwright model status` / `stop`); `0` starts the model inside each command. `serve` "
        "and `worker` keep their own model in-process",
        ge=0,
    )
    command_keep_warm: float = setting(
        600.0,
        "seconds a warm command process stays after its last `ask` or `search`: it keeps the "
        "application imported, the embedding model's session and the token table built, and "
        "runs the next `ask` or `search` of the same context (directory, environment, "
        "installed code) in place of a new process; settings, stores and the index are "
        "still opened per command. `0`: every command starts afresh "
        "(`ragwright model status` / `stop`; docs/cli.md)",
        ge=0,
    )
    threads: int | None = setting(
        None,
        "threads the embedded local model computes with; unset: llama.cpp's default, one per "
        "core. On a machine other work keeps busy, `1` answers faster: llama.cpp's threads "
        "wait for each other at every step, and a thread the system has set aside holds up "
        'the rest (docs/chat.md, "Threads of the local model"). A background model started '
        "with another count is restarted when no other command is using it",
        ge=1,
    )
    schema_style: Literal["auto", "object", "variants"] = setting(
        "auto",
        "answer schema: `variants` (anyOf, grammar engines), `object` (hosted strict modes); auto "
        "= variants for local/ollama, object for openai/azure-openai",
    )
    context_window: int = setting(
        4096,
        "the primary model's context window (o200k_base tokens); sizes the answer's `Budget`",
        gt=0,
    )
    output_limit: int = setting(
        512,
        "output tokens reserved for the primary's answer (must be below the window)",
        gt=0,
    )
    fallbacks: tuple[ChatFallback, ...] = setting(
        (),
        "ordered alternate chat providers, tried when the primary fails transiently (see "
        "[below](#fallback-chat-providers))",
    )

    @field_validator("temperature", mode="before")
    @classmethod
    def _provider_temperature(cls, value: object) -> object:
        return None if value in ("provider", "") else value

    @field_validator("fallbacks")
    @classmethod
    def _distinct_fallbacks(cls, value: tuple[ChatFallback, ...]) -> tuple[ChatFallback, ...]:
        labels = [f.label for f in value]
        for index, label in enumerate(labels):
            if label in labels[:index]:
                raise ValueError(f"[{index}].name: {label!r} is used twice; give each a name")
        return value


class AnswersSettings(Group):
    """How answers are made and what is shown when the model cannot answer."""

    deadline: float = setting(
        120.0,
        "seconds one answer may take end to end (retrieval, every model attempt and wait); `ask "
        "--deadline` sets it per request",
        gt=0,
        le=3600,
    )
    style: Literal["auto", "quoted", "generated", "evidence"] = setting(
        "auto",
        "how answers are made: `quoted` (the model selects evidence sentences, returned verbatim),"
        " `generated` (free text with citations, support-checked), `evidence` (no model; the most "
        "relevant sentences, labelled as not an answer); `auto` is `quoted` for the local model "
        "and `generated` for hosted ones; `ask --style` sets it per request "
        "([answers.md](answers.md))",
    )
    answerability_threshold: float | None = setting(
        None,
        "least cosine similarity between the question and its best evidence sentence for a model "
        "call; below it the answer is `insufficient`; unset: the persisted calibration's value "
        "(`eval calibrate --write`), else the embedding profile's measured default, labelled "
        "uncalibrated (0.48 for the bundled MiniLM; [answers.md](answers.md#a-default-before-"
        "calibration)), else none",
        shown="unset",
        ge=-1.0,
        le=1.0,
    )
    support_check: bool = setting(
        True,
        "check every answer against its cited evidence; one that is not supported (or echoes text "
        "in the evidence addressed to the model) is withheld with status `unsupported`; `ask "
        "--no-check-support` turns it off per request",
    )
    templates: Path | None = setting(
        None,
        "approved templates file (YAML or JSON): reviewed text per question class, offered with "
        "mode `approved_template` when the model is unavailable (see [below](#approved-templates))",
    )
    evidence_only_on_model_failure: bool = setting(
        True,
        "when the model is unavailable and no template applies: the cited evidence without an "
        "answer (`evidence_only`); `false` makes it `unavailable` (HTTP 503)",
    )
    draft_max_age: float = setting(
        86400.0,
        "seconds a stored earlier answer to the same question may be shown while the model is "
        "unavailable (mode `previous_draft`, labelled with its age), and only while its inputs "
        "still match: the cited documents' revisions, assembly policy, instructions version and "
        "tenant ([service.md](service.md#degradation)); `0` stores and shows no drafts",
        ge=0,
    )


class ServiceSettings(Group):
    """Admission, request bodies, sign-ins and authentication failures of the HTTP service
    (`ragwright serve`)."""

    concurrency: int = setting(
        8,
        "interactive requests (answers, searches) in progress at once per service process; excess "
        "gets 503 at once, before any work ([service.md](service.md#admission-and-capacity))",
        gt=0,
    )
    tenant_concurrency: int | None = setting(
        None,
        "interactive requests in progress at once per tenant in one process; excess gets 429; "
        "unset: only the process limit",
        shown="unset",
        gt=0,
    )
    max_body: int = setting(
        4 * 1024 * 1024,
        "largest request body in bytes (4 MiB) the service reads for an answer (the page's too), "
        "a search or an answer job (it holds the longest valid history); a larger one is refused "
        "`413 body-too-large` before more than the limit is read, a chunked one too "
        "([service.md](service.md#request-bodies))",
        gt=0,
    )
    max_ingest_body: int = setting(
        64 * 1024 * 1024,
        "largest request body in bytes (64 MiB) of `POST /v1/ingestions` (`ingest --server` sends "
        "the whole corpus in one request: raise it for larger corpora) and of "
        "`POST /v1/ingestions/files` (whose files may hold at most 100 MiB in all whatever it "
        "is); a larger one is refused `413 body-too-large` the same way",
        gt=0,
    )
    auth_failures: int = setting(
        10,
        "failed authentications (a wrong or revoked key, as a bearer token or in the page's "
        "sign-in form) one client address may make before it must wait: until the wait ends its "
        "attempts get `429 authentication-throttled` with `Retry-After`, unchecked "
        "([service.md](service.md#authentication-failures))",
        ge=1,
    )
    auth_backoff: float = setting(
        1.0,
        "seconds of an address's first wait; each failure after a wait doubles the next, up to "
        "`RAGWRIGHT_SERVE_AUTH_WINDOW`",
        gt=0,
    )
    auth_window: float = setting(
        900.0,
        "seconds without a failure (after the last one, or the end of its wait) after which an "
        "address's failures are forgotten; also the longest wait",
        gt=0,
    )
    sign_ins_per_key: int = setting(
        60,
        "sign-ins to the page one API key may make in any 60 seconds; more get `429` with "
        "`Retry-After` ([web.md](web.md#sessions-cookies-and-csrf))",
        ge=1,
    )
    sessions_per_key: int = setting(
        1000,
        "page sessions one API key may hold at once; a sign-in past it ends that key's least "
        "recently used session, never another key's",
        ge=1,
    )


class JobsSettings(Group):
    """Answer jobs: workers, capacity, and how long jobs, leases and attempts last."""

    workers: int = setting(
        2,
        "answer jobs this process runs at once (`serve`, `worker`); `0`: it accepts jobs but runs "
        "none",
        ge=0,
    )
    capacity: int = setting(
        2,
        "answer jobs running at once across every worker of every replica, and the size of the "
        "answer jobs' model-capacity pool (named `batch`, separate from the interactive `chat` "
        "pool)",
        gt=0,
    )
    tenant_capacity: int | None = setting(
        None,
        "answer jobs running at once per tenant; unset: only the pool limit",
        shown="unset",
        gt=0,
    )
    ttl: float = setting(
        3600.0,
        "seconds an answer job may wait and run before it is `expired`",
        gt=0,
    )
    retention: float = setting(
        604800.0,
        "seconds a finished answer job (`succeeded`, `failed`, `cancelled`, `expired`) is kept, "
        "with its result and failure; then the workers' sweep (every 10 s) deletes it. Its "
        "`Idempotency-Key` stays bound to it until then: the same key names that job (or is `409` "
        "for another body) for the job's retention, and a new job after",
        shown="`604800` (7 days)",
        gt=0,
    )
    lease: float = setting(
        30.0,
        "seconds a worker's claim on a job lasts unless renewed (every third of it); a dead "
        "worker's job is claimed again after it",
        gt=0,
    )
    deadline: float = setting(
        300.0,
        "seconds one attempt at a job's answer may take",
        gt=0,
        le=3600,
    )


class TelemetrySettings(Group):
    """Export of chat spans and metrics."""

    exporter: Literal["none", "console", "otlp"] = setting(
        "none",
        "export chat spans and metrics: `otlp` (OTLP over HTTP) or `console` (standard error)",
    )
    endpoint: str | None = setting(
        None,
        "OTLP/HTTP collector base URL (e.g. `http://127.0.0.1:4318`); unset follows "
        "`OTEL_EXPORTER_OTLP_*`",
    )
    service_name: str = setting(
        "ragwright",
        "`service.name` of the exported resource",
        min_length=1,
    )
    capture_content: bool = setting(
        False,
        "record prompts, instructions and completions on spans; **they carry customer evidence** —"
        " keep off except against a trusted collector",
    )
