"""Settings come from the environment; defaults apply to what is unset or empty."""

from __future__ import annotations

from app.config import DEFAULT_MODEL, Settings
from app.i18n import TEXT, language_of, text


def test_defaults():
    settings = Settings.from_env({})
    assert settings.vllm_base_url == "http://127.0.0.1:8000/v1"
    assert settings.server_root == "http://127.0.0.1:8000"
    assert settings.chat_port == 7860 and settings.chat_host == "127.0.0.1"
    assert settings.model == DEFAULT_MODEL == "baidu/ERNIE-4.5-0.3B-PT"
    assert settings.api_key.get_secret_value() == ""


def test_environment_overrides_and_empty_values():
    settings = Settings.from_env({"VLLM_PORT": "9001", "TEMPERATURE": "0.2", "MODEL_NAME": "",
                                  "API_KEY": "s3cret", "SYSTEM_PROMPT": "", "CHAT_PORT": "7999"})
    assert settings.vllm_base_url == "http://127.0.0.1:9001/v1"
    assert settings.temperature == 0.2 and settings.model_name == "" and settings.system_prompt == ""
    assert settings.chat_port == 7999
    assert "s3cret" not in repr(settings)


def test_base_url_wins_over_host_and_port():
    settings = Settings.from_env({"VLLM_BASE_URL": "http://10.1.2.3:1234/v1/", "VLLM_PORT": "9"})
    assert settings.server_root == "http://10.1.2.3:1234"


def test_every_text_exists_in_both_languages():
    assert set(TEXT["en"]) == set(TEXT["zh"])
    assert language_of("zh-CN") == language_of("zh-TW") == "zh"
    assert language_of("en-US") == language_of("fr") == language_of(None) == "en"
    assert text("zh", "stopped") == "已停止"
