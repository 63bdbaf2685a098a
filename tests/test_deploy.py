"""deploy/compose.yaml stays a deployment that starts in order: each ragwright process
waits for healthy PostgreSQL and Redis, each API replica reports its own readiness, and
every process reads one calibration (docs/jobs.md, "Replica deployment")."""

from __future__ import annotations

from typing import Any

import yaml

from tests.conftest import REPO

COMPOSE = REPO / "deploy" / "compose.yaml"


def services() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return dict(loaded["services"])


def ragwright_services() -> dict[str, Any]:
    return {name: s for name, s in services().items() if s.get("image") == "ragwright"}


def test_the_servers_have_healthchecks_that_ask_them() -> None:
    found = services()
    assert found["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert found["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_every_ragwright_process_waits_for_healthy_postgres_and_redis() -> None:
    for name, service in ragwright_services().items():
        depends = service["depends_on"]
        assert depends["postgres"] == {"condition": "service_healthy"}, name
        assert depends["redis"] == {"condition": "service_healthy"}, name
        assert "qdrant" in depends, name


def test_each_api_replica_is_healthy_only_when_readyz_answers() -> None:
    replicas = {n: s for n, s in ragwright_services().items() if "serve" in s["command"]}
    assert len(replicas) >= 2
    for name, service in replicas.items():
        check = " ".join(service["healthcheck"]["test"])
        assert "/readyz" in check and service["command"][-1] in check, name


def test_every_ragwright_process_shares_the_calibration_beside_the_index() -> None:
    for name, service in ragwright_services().items():
        assert "index-state:/data/index" in service["volumes"], name
        assert service["environment"]["RAGWRIGHT_HOME"] == "/data", name
