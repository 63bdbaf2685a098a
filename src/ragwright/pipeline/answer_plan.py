"""What one answer is made from, as one typed, validated record: :class:`AnswerPlan`.

The plan holds the question, who asks (eligibility, scope, history, current revisions),
the parts that do the work (retriever, chat model, token counter) and every option. It
is checked once, when it is made, so no stage of the answer path has to check it again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ragwright.chat.contract import ChatMessage, ChatModel, Deadline, ModelProfile
from ragwright.core.answers import ANSWER_STYLES, AnswerStyle, SchemaStyle
from ragwright.core.assembly import AssembledContext, Turn, parse_policy
from ragwright.core.eligibility import CallerScope, Eligibility
from ragwright.errors import AssemblyError
from ragwright.pipeline.answer_records import Budget
from ragwright.pipeline.retrieve import Mode, Retriever, Thresholds
from ragwright.protocols import TokenCounter

NEEDS_CURRENT_REVISIONS = (
    "policy +prefer-current-revision needs the documents' current revisions "
    "(current_revisions; ask --current-revision DOC=REV)"
)


@dataclass(frozen=True, slots=True)
class AnswerPlan:
    """One answer's inputs. Made once; checked when made.

    ``style`` is how the answer is made (``docs/answers.md``): ``generated`` (the model
    writes and cites; ``support_check`` turns an answer its evidence does not support
    into ``unsupported``), ``quoted`` (the model selects evidence sentences, which are the
    answer verbatim) or ``evidence`` (no model call; ``evidence_only``). ``chat`` may be
    ``None`` for a preview or the ``evidence`` style (:attr:`answer_style` is then
    ``evidence``).

    ``budget``, ``schema_style`` and ``counter`` describe the primary model;
    ``fallbacks`` are the profiles of the alternates ``chat`` may fail over to
    (``runtime.chat_profiles(settings)[1:]``). ``temperature`` 0 makes a greedy,
    repeatable answer (``None`` leaves it to the provider). ``thresholds`` (calibrated
    with ``eval calibrate``) let a question whose best evidence scores too low end as
    ``no_eligible_evidence``; below ``answerability_threshold`` the status is
    ``insufficient``, both without a model call. ``history`` holds the conversation's
    earlier messages (user, assistant, …), used by a policy with a history share.
    ``current_revisions`` (document id → revision, from a trusted source of truth) is
    required by ``+prefer-current-revision``. ``on_evidence`` is called once with the
    assembled context before any model call (the HTTP stream's ``evidence`` event).
    ``deadline`` ``None`` gives the answer 120 seconds from its start.

    Raises:
        ValueError: an unknown ``style``.
        AssemblyError: malformed ``history`` (naming the message), or
            ``+prefer-current-revision`` without ``current_revisions``.
    """

    question: str
    retriever: Retriever
    eligibility: Eligibility
    scope: CallerScope
    chat: ChatModel | None
    counter: TokenCounter
    k: int = 5
    mode: Mode = "hybrid"
    policy: str = "seed-baseline"
    budget: Budget = field(default_factory=Budget)
    deadline: Deadline | None = None
    preview: bool = False
    support_check: bool = True
    schema_style: SchemaStyle = "variants"
    temperature: float | None = 0.0
    thresholds: Thresholds = Thresholds()
    history: Sequence[ChatMessage] = ()
    current_revisions: Mapping[str, str] | None = None
    fallbacks: Sequence[ModelProfile] = ()
    style: AnswerStyle = "generated"
    answerability_threshold: float | None = None
    on_evidence: Callable[[AssembledContext], None] | None = None

    def __post_init__(self) -> None:
        if self.style not in ANSWER_STYLES:
            raise ValueError(
                f"unknown answer style {self.style!r}; expected one of {ANSWER_STYLES}"
            )
        history_turns(self.history)
        if parse_policy(self.policy).prefer_current_revision and self.current_revisions is None:
            raise AssemblyError(NEEDS_CURRENT_REVISIONS)

    @property
    def answer_style(self) -> AnswerStyle:
        """The style the answer is made in: ``evidence`` when there is no model to ask
        (and this is no preview, which shows what the model would receive)."""
        return "evidence" if self.chat is None and not self.preview else self.style

    @property
    def turns(self) -> tuple[Turn, ...]:
        """The history as turns (checked when the plan was made)."""
        return history_turns(self.history)

    @property
    def scores_sentences(self) -> bool:
        """Whether evidence sentences are scored against the question: for every style
        but ``generated``, and for that one when an answerability threshold gates it."""
        return self.answer_style != "generated" or self.answerability_threshold is not None

    @property
    def cache_scope(self) -> str:
        """The request's trusted scope (the response cache never crosses tenants)."""
        return f"tenant:{self.scope.tenant}" if self.scope.tenant else "tenant:-"

    @property
    def support_checked(self) -> bool:
        """Whether the support check runs: on request, for generated answers only."""
        return self.support_check and self.answer_style == "generated"


def history_turns(history: Sequence[ChatMessage]) -> tuple[Turn, ...]:
    """Earlier turns from a conversation: ``user`` then ``assistant``, alternating.

    Raises:
        AssemblyError: naming the message (``history[2].role``) and the rule it breaks.
    """
    if len(history) % 2:
        raise AssemblyError(
            f"history[{len(history) - 1}]: the history must end with an assistant message"
        )
    turns: list[Turn] = []
    for index in range(0, len(history), 2):
        question, answer = history[index], history[index + 1]
        expected: tuple[tuple[int, ChatMessage, Literal["user", "assistant"]], ...] = (
            (index, question, "user"),
            (index + 1, answer, "assistant"),
        )
        for position, message, role in expected:
            if message.role != role:
                raise AssemblyError(
                    f"history[{position}].role: expected {role!r} (user and assistant "
                    f"alternate, user first), got {message.role!r}"
                )
        if not question.content.strip():
            raise AssemblyError(f"history[{index}].content: must not be blank")
        turns.append(Turn(question.content, answer.content))
    return tuple(turns)


class ScaledCounter:
    """Token counts of another tokenizer, estimated as ``ceil(count × ratio)``."""

    def __init__(self, counter: TokenCounter, ratio: float) -> None:
        self._counter = counter
        self._ratio = ratio
        self.encoding_name = f"{counter.encoding_name}x{ratio:g}"

    def count(self, text: str) -> int:
        return math.ceil(self._counter.count(text) * self._ratio)
