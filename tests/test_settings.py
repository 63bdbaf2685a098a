from __future__ import annotations

from pathlib import Path

import pytest

from ragwright.errors import ConfigError
from ragwright.settings import load_settings


def test_defaults() -> None:
    settings = load_settings()
    assert settings.storage.home == Path(".ragwright")
    assert settings.chunking_policy().version == "section-paragraphs-80w-overlap1-v1"
    assert settings.index_path == Path(".ragwright/index/support-documents")


def test_environment_overrides_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ragwright.toml").write_text('max_words = 60\ncollection = "team-docs"\n')
    monkeypatch.setenv("RAGWRIGHT_MAX_WORDS", "50")
    settings = load_settings()
    assert (settings.index.max_words, settings.index.collection) == (50, "team-docs")


def test_explicit_config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "conf" / "x.toml"
    config.parent.mkdir()
    config.write_text('chunking = "sentence-blocks"\n')
    monkeypatch.setenv("RAGWRIGHT_CONFIG", str(config))
    assert load_settings().chunking_policy().version.startswith("sentence-blocks-")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RAGWRIGHT_MAX_WORDS", "0"),
        ("RAGWRIGHT_BACKEND", "pinecone"),
        ("RAGWRIGHT_CHUNKING", "fixed"),
        ("RAGWRIGHT_COLLECTION", "bad name/with slash"),
        ("RAGWRIGHT_CHAT_TEMPERATURE", "3"),
        ("RAGWRIGHT_CHAT_SCHEMA_STYLE", "loose"),
        ("RAGWRIGHT_EMBEDDING_IN_FLIGHT", "0"),
    ],
)
def test_invalid_values_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.setting == name


def test_unknown_toml_key_is_named(tmp_path: Path) -> None:
    (tmp_path / "ragwright.toml").write_text("max_wrods = 10\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.setting == "RAGWRIGHT_MAX_WRODS"


def test_missing_config_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAGWRIGHT_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.setting == "RAGWRIGHT_CONFIG"


@pytest.mark.parametrize(
    ("env", "temperature", "style"),
    [
        ({}, 0.0, "variants"),
        ({"RAGWRIGHT_CHAT_TEMPERATURE": "provider"}, None, "variants"),
        ({"RAGWRIGHT_CHAT_PROVIDER": "openai", "RAGWRIGHT_CHAT_MODEL": "m"}, 0.0, "object"),
        (
            {"RAGWRIGHT_CHAT_PROVIDER": "ollama", "RAGWRIGHT_CHAT_TEMPERATURE": "0.4"},
            0.4,
            "variants",
        ),
        (
            {"RAGWRIGHT_CHAT_PROVIDER": "openai", "RAGWRIGHT_CHAT_SCHEMA_STYLE": "variants"},
            0.0,
            "variants",
        ),
    ],
)
def test_answer_options_follow_the_provider(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], temperature: float | None, style: str
) -> None:
    from ragwright.runtime import answer_schema_style

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.chat.temperature == temperature
    assert answer_schema_style(settings) == style


def test_chat_fallbacks_from_toml_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ragwright.toml").write_text(
        "[[chat_fallbacks]]\n"
        'provider = "openai"\nmodel = "gpt-small"\ncontext_window = 2048\n'
        'schema_style = "object"\n'
        "[[chat_fallbacks]]\n"
        'provider = "ollama"\nmodel = "qwen2.5:0.5b"\nname = "tiny"\n'
    )
    fallbacks = load_settings().chat.fallbacks
    assert [(f.label, f.context_window, f.schema_style) for f in fallbacks] == [
        ("openai:gpt-small", 2048, "object"),
        ("tiny", 4096, "auto"),
    ]


@pytest.mark.parametrize(
    ("value", "setting"),
    [
        (
            '[{"provider": "openai", "context_window": 0}]',
            "RAGWRIGHT_CHAT_FALLBACKS[0].context_window",
        ),
        ('[{"provider": "ollama", "model": "m", "extra": 1}]', "RAGWRIGHT_CHAT_FALLBACKS[0].extra"),
        (
            '[{"provider": "ollama", "model": "m", "context_window": 256}]',
            "RAGWRIGHT_CHAT_FALLBACKS[0]",
        ),
        (
            '[{"provider": "ollama", "model": "m"}, {"provider": "ollama", "model": "m"}]',
            "RAGWRIGHT_CHAT_FALLBACKS",
        ),
    ],
)
def test_a_bad_fallback_is_named_by_its_path(
    monkeypatch: pytest.MonkeyPatch, value: str, setting: str
) -> None:
    monkeypatch.setenv("RAGWRIGHT_CHAT_FALLBACKS", value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.setting == setting


def test_a_misspelt_environment_setting_stops_the_command_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAGWRIGHT_SERVE_CONCURRENCYY", "3")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.setting == "RAGWRIGHT_SERVE_CONCURRENCYY"
    assert "did you mean RAGWRIGHT_SERVE_CONCURRENCY?" in str(caught.value)
    # Through the entry point a user calls: one line, exit 1, nothing created.
    from tests.cli import ragwright

    monkeypatch.delenv("RAGWRIGHT_SERVE_CONCURRENCYY")
    result = ragwright("status", home=tmp_path / "h", RAGWRIGHT_MAX_WORD="5")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "RAGWRIGHT_MAX_WORD" in result.stderr
    assert "did you mean RAGWRIGHT_MAX_WORDS?" in result.stderr
    assert not (tmp_path / "h").exists()


def test_variables_that_are_not_settings_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAGWRIGHT_API_KEY", "RAGWRIGHT_TEST_REDIS_URL"):
        monkeypatch.setenv(name, "x")
    load_settings()
