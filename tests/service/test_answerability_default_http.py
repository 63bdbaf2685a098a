"""An HTTP answer says when the answerability threshold it ran under is the embedding
profile's uncalibrated default (issue 47 item 6), and which source applied otherwise."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from ragwright.testing.fakes import HASHING_PROFILE
from ragwright.types import EmbeddingProfile
from tests.application.components import FakeComponents
from tests.service.conftest import QUESTION, Service, bearer

Client = Callable[[Service], TestClient]


@pytest.fixture
def defaulted(monkeypatch: pytest.MonkeyPatch) -> float:
    """The hashing profile with a default above every signal of the sample corpus."""
    default = 0.999
    profile = dataclasses.replace(HASHING_PROFILE, default_answerability_threshold=default)

    def embedding_profile(self: FakeComponents) -> EmbeddingProfile:
        return profile

    monkeypatch.setattr(FakeComponents, "embedding_profile", embedding_profile)
    return default


def test_an_answer_under_the_default_says_uncalibrated(
    make_service: Callable[..., Service], client_for: Client, defaulted: float
) -> None:
    service = make_service()
    secret = service.key("alice")
    response = client_for(service).post(
        "/v1/answers", json={"question": QUESTION}, headers=bearer(secret)
    )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "insufficient" and body["reason"] == "evidence_does_not_answer"
    assert body["options"]["answerability_threshold"] == defaulted
    assert body["options"]["answerability_source"] == "uncalibrated-default"
    assert body["answerability"]["threshold"] == defaulted


def test_the_setting_replaces_the_default_over_http(
    make_service: Callable[..., Service], client_for: Client, defaulted: float
) -> None:
    service = make_service(answerability_threshold=-1.0)
    secret = service.key("alice")
    response = client_for(service).post(
        "/v1/answers", json={"question": QUESTION}, headers=bearer(secret)
    )
    body = response.json()
    assert body["options"]["answerability_source"] == "settings"
    assert body["status"] == "answered"


def test_a_streamed_answer_under_the_default_says_uncalibrated(
    make_service: Callable[..., Service], client_for: Client, defaulted: float
) -> None:
    service = make_service()
    secret = service.key("alice")
    response = client_for(service).post(
        "/v1/answers/stream", json={"question": QUESTION}, headers=bearer(secret)
    )
    assert response.status_code == 200
    outcome = json.loads(response.text.rsplit("data: ", 1)[1])
    assert outcome["reason"] == "evidence_does_not_answer"
    assert outcome["answerability_source"] == "uncalibrated-default"
    assert outcome["answerability"]["threshold"] == defaulted
