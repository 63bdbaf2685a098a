"""The draft store's statements (:mod:`ragwright.adapters.drafts`), for either engine.

``drafts`` holds one row per (tenant, question key, input version) with the answer's
JSON; ``draft_documents`` one row per document a draft cites, so a purge finds every
draft citing a changed document with one indexed delete (its rows go with it, ``ON
DELETE CASCADE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragwright.adapters.queries.dialect import Dialect

COLUMNS = ("tenant", "question_key", "input_version", "cited", "result", "created_at")


class DraftQueries:
    """Every statement of the draft store, written for ``dialect``."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        p = dialect.p
        columns = ", ".join(COLUMNS)
        self.create = (
            f"""CREATE TABLE drafts (
    tenant TEXT NOT NULL,
    question_key TEXT NOT NULL,
    input_version TEXT NOT NULL,
    cited {dialect.json} NOT NULL,
    result {dialect.json} NOT NULL,
    created_at {dialect.real} NOT NULL,
    PRIMARY KEY (tenant, question_key, input_version)
){dialect.table_options}""",
            f"""CREATE TABLE draft_documents (
    tenant TEXT NOT NULL,
    document_id TEXT NOT NULL,
    question_key TEXT NOT NULL,
    input_version TEXT NOT NULL,
    PRIMARY KEY (tenant, document_id, question_key, input_version),
    FOREIGN KEY (tenant, question_key, input_version)
        REFERENCES drafts (tenant, question_key, input_version) ON DELETE CASCADE
){dialect.table_options}""",
            "CREATE INDEX drafts_newest ON drafts (tenant, question_key, created_at)",
        )
        marks = ", ".join(getattr(p, name) for name in COLUMNS)
        self.put = (
            f"INSERT INTO drafts ({columns}) VALUES ({marks}) "
            "ON CONFLICT (tenant, question_key, input_version) DO UPDATE SET "
            "cited = excluded.cited, result = excluded.result, "
            "created_at = excluded.created_at"
        )
        self.cite = (
            "INSERT INTO draft_documents (tenant, document_id, question_key, input_version) "
            f"VALUES ({p.tenant}, {p.document_id}, {p.question_key}, {p.input_version}) "
            "ON CONFLICT DO NOTHING"
        )
        self.find = (
            f"SELECT {columns} FROM drafts WHERE tenant = {p.tenant} "
            f"AND question_key = {p.question_key} ORDER BY created_at DESC LIMIT {p.limit}"
        )

    def purge(self, document_ids: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """Delete the tenant's drafts citing any of ``document_ids`` (``tenant`` still
        to bind), returning one row per draft deleted."""
        cited, params = self._dialect.among("document_id", "ids", document_ids)
        return (
            "DELETE FROM drafts WHERE (tenant, question_key, input_version) IN ("
            "SELECT tenant, question_key, input_version FROM draft_documents "
            f"WHERE tenant = {self._dialect.p.tenant} AND {cited}) RETURNING tenant",
            params,
        )
