"""Settings come from the environment, then .env; defaults apply to what is unset or empty; bad values are named."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app import listening
from app.config import DEFAULT_MODEL, Settings, dotenv_file, explain
from app.i18n import TEXT, language_of, text
from serving.plan import ServeSettings
from serving.router import RouterSettings
from tests.support.hostile_env import documented_variables
from tests.support.servers import PROJECT_VARIABLES, ROOT, hermetic_environment


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch):
    """Set variables for Settings() to read (conftest already removed the user's own)."""

    def set_variables(**variables: str) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)

    return set_variables


def test_defaults():
    settings = Settings()
    assert settings.base_url == "http://127.0.0.1:8000/v1"
    assert settings.server_root == "http://127.0.0.1:8000"
    assert settings.chat_port == 7860 and settings.chat_host == "127.0.0.1"
    assert settings.model == DEFAULT_MODEL == "baidu/ERNIE-4.5-0.3B-PT"
    assert settings.api_key.get_secret_value() == ""
    assert settings.origins == ("http://localhost:7860", "http://127.0.0.1:7860", "http://[::1]:7860")
    assert settings.hosts == ("127.0.0.1", "::1", "localhost")


def test_environment_overrides_and_empty_values(environment):
    environment(
        VLLM_PORT="9001",
        TEMPERATURE="0.2",
        MODEL_NAME="",
        API_KEY="s3cret",
        SYSTEM_PROMPT="",
        CHAT_PORT="7999",
        MAX_TOKENS="",
    )
    settings = Settings()
    assert settings.base_url == "http://127.0.0.1:9001/v1"
    assert settings.temperature == 0.2 and settings.model_name == "" and settings.system_prompt == ""
    assert settings.chat_port == 7999 and settings.max_tokens == 512
    assert "s3cret" not in repr(settings)
    assert settings.origins[0] == "http://localhost:7999"


def test_base_url_wins_over_host_and_port(environment):
    environment(VLLM_BASE_URL="http://10.1.2.3:1234/v1/", VLLM_PORT="9")
    assert Settings().server_root == "http://10.1.2.3:1234"


def test_allowed_origins_setting(environment):
    environment(ALLOWED_ORIGINS="https://chat.example.com, http://10.0.0.5:7860", CHAT_HOST="0.0.0.0")
    settings = Settings()
    assert settings.origins == ("https://chat.example.com", "http://10.0.0.5:7860")
    assert settings.hosts == ("10.0.0.5", "127.0.0.1", "::1", "chat.example.com", "localhost")
    environment(ALLOWED_ORIGINS="*")
    assert Settings().hosts == ("*",)


def test_a_listening_address_of_its_own_is_an_allowed_origin(environment):
    environment(CHAT_HOST="192.168.7.7", CHAT_PORT="8080")
    assert "http://192.168.7.7:8080" in Settings().origins
    for every_interface in ("0.0.0.0", "::"):  # not an address a browser uses: nothing added
        environment(CHAT_HOST=every_interface)
        assert len(Settings().origins) == 3


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CHAT_PORT", "abc", "CHAT_PORT=abc: Input should be a valid integer"),
        ("CHAT_PORT", "70000", "CHAT_PORT=70000: Input should be less than or equal to 65535"),
        ("TEMPERATURE", "hot", "TEMPERATURE=hot: Input should be a valid number"),
        ("ALLOWED_ORIGINS", "chat.example.com/path", "ALLOWED_ORIGINS=chat.example.com/path: Value error, "),
        ("UPLOAD_TYPES", ".txt,pdf", "UPLOAD_TYPES=.txt,pdf: Value error, 'pdf' is not a file name ending like .txt"),
        ("TRUSTED_PROXIES", "10.0.0.5,proxy.lan", "TRUSTED_PROXIES=10.0.0.5,proxy.lan: Value error, 'proxy.lan'"),
    ],
)
def test_a_bad_value_is_named_in_one_line(environment, variable, value, message):
    environment(**{variable: value})
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert len(explain(caught.value)) == 1 and explain(caught.value)[0].startswith(message)


def test_env_file_is_read_unless_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    env_file = tmp_path / ".env"
    env_file.write_text("CHAT_PORT=7111\nSYSTEM_PROMPT=from the file\n")
    assert Settings(_env_file=env_file).chat_port == 7111
    monkeypatch.setenv("CHAT_PORT", "7222")  # the real environment wins over .env
    assert Settings(_env_file=env_file).chat_port == 7222
    assert dotenv_file() is None  # conftest disables .env files for everything the tests run
    monkeypatch.delenv("PYTHON_DOTENV_DISABLED")
    assert dotenv_file() == ROOT / ".env"


def test_every_documented_variable_is_a_setting_stripped_from_test_servers(tmp_path: Path):
    documented = set(documented_variables())
    assert documented <= PROJECT_VARIABLES and not documented & set(hermetic_environment())
    # CI runs the tests under hostile_env's .env: every value valid, none the default.
    hostile = tmp_path / ".env"
    assert subprocess.run([sys.executable, str(ROOT / "tests/support/hostile_env.py"), str(hostile)]).returncode == 0
    for kind in (Settings, ServeSettings, RouterSettings):
        configured, default = kind(_env_file=hostile), kind()
        for name in kind.model_fields:
            if name.upper() in documented:
                assert getattr(configured, name) != getattr(default, name), name


def test_bad_values_stop_the_programs_with_one_line_each():
    for module, program, variable, value, problem in (
        ("app", "chat", "CHAT_PORT", "abc", "Input should be a valid integer, unable to parse string as an integer"),
        ("serving", "serve", "VLLM_NICE", "30", "Input should be less than or equal to 19"),
        ("serving.router", "router", "ROUTER_PORT", "99999", "Input should be less than or equal to 65535"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", module, *(["--dry-run"] if module.startswith("serving") else [])],
            cwd=ROOT,
            env=hermetic_environment(**{variable: value}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [f"make {program}: {variable}={value}: {problem}"]


def test_a_chat_port_in_use_stops_make_chat_and_make_run_before_anything_starts(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for module, program in (("app", "chat"), ("tools.run", "run")):
            result = subprocess.run(
                [sys.executable, "-m", module],
                cwd=ROOT,
                env=hermetic_environment(CHAT_PORT=str(port), DATA_DIR=str(tmp_path), OPEN_BROWSER="false"),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert result.returncode == 2, result.stdout + result.stderr
            in_use = f"CHAT_PORT={port}: 127.0.0.1:{port} is in use (the chat UI already running?); choose another port"
            assert result.stderr.strip().splitlines() == [f"make {program}: {in_use}"]
            assert result.stdout == ""  # no link handed out, no vLLM started
    # The link of the chat UI running there, were it one, stays what `make link` prints.
    assert not (tmp_path / "local-link").exists()


def test_an_address_not_of_this_machine_is_named():
    # 192.0.2.0/24 is for documentation (RFC 5737): never an address of a machine.
    assert listening.unavailable("192.0.2.1", 7860) == "CHAT_HOST=192.0.2.1: not an address of this machine"
    assert listening.unavailable("127.0.0.1", 0) is None


def test_trusted_proxies_are_addresses_and_networks(environment):
    environment(TRUSTED_PROXIES=" 127.0.0.2, 10.0.0.0/8 ,::1")
    assert [str(network) for network in Settings().proxy_networks] == ["127.0.0.2/32", "10.0.0.0/8", "::1/128"]
    environment(TRUSTED_PROXIES="")
    assert Settings().proxy_networks == ()


def test_serve_settings(environment):
    environment(VLLM_PORT="8123", MAX_NUM_SEQS="0", PROFILE="dev", MODEL="")
    settings = ServeSettings()
    assert settings.vllm_port == 8123 and settings.max_num_seqs == 0 and settings.profile == "dev"
    assert settings.model == "baidu/ERNIE-4.5-0.3B-PT"
    for variable, value in (("DEVICE", "tpu"), ("VLLM_NICE", "20"), ("VLLM_NICE", "-5"), ("PROFILE", "fast")):
        environment(**{variable: value})
        with pytest.raises(ValidationError, match=variable.lower()):
            ServeSettings()
        environment(**{variable: ""})


def test_every_text_exists_in_both_languages():
    assert set(TEXT["en"]) == set(TEXT["zh"])
    assert language_of("zh-CN") == language_of("zh-TW") == "zh"
    assert language_of("en-US") == language_of("fr") == language_of(None) == "en"
    assert text("zh", "stopped") == "已停止"
