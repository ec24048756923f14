"""Write a .env that sets every variable of .env.example to another valid value (CI runs the tests under it).

Standard library only: .ci/run calls it before anything is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = {
    "CHAT_HOST": "127.0.0.2",
    "CHAT_PORT": "7861",
    "ALLOWED_ORIGINS": "http://hostile.example:7861",
    "FRAME_ANCESTORS": "https://hostile.example",
    "LOGIN_ATTEMPTS": "1",
    "TRUSTED_PROXIES": "10.99.0.0/16",
    "TRUSTED_USER_HEADER": "X-Hostile-User",
    "TRUSTED_EMAIL_HEADER": "X-Hostile-Email",
    "TRUSTED_GROUPS_HEADER": "X-Hostile-Groups",
    "SIGN_ON_VERIFIED_EMAIL_PROVIDERS": "hostile-provider",
    "OPEN_BROWSER": "false",
    "SIGN_ON_ADMIN_GROUP": "hostile-admins",
    "SIGN_ON_GROUPS_CLAIM": "hostile_groups",
    "ANSWERS_PER_USER": "1",
    "MESSAGES_PER_MINUTE": "1",
    "DAILY_TOKEN_QUOTA": "5",
    "LIMIT_LOCAL_USER": "true",
    "METRICS_PORT": "9",
    "LOGIN_WINDOW_MINUTES": "600",
    "LOGIN_HOURS": "0.01",
    "MAX_REQUEST_MB": "0.001",
    "UPLOAD_MAX_MB": "1000",
    "UPLOAD_MAX_FILES": "1",
    "UPLOAD_MAX_PAGES": "3",
    "UPLOAD_MAX_CHARACTERS": "1000",
    "UPLOAD_TYPES": ".exe",
    "IMPORT_MAX_MB": "1",
    "LIBRARY_MAX_MB": "1",
    "DOCUMENTS_PER_CHAT": "1",
    "DOCUMENT_SHARE": "0.2",
    "DOCUMENT_TOKENS": "7",
    "EMBEDDINGS_URL": "http://127.0.0.6:8006/v1",
    "EMBEDDINGS_MODEL": "hostile-embedder",
    "EMBEDDINGS_API_KEY": "hostile-embed-key",
    "API_KEYS_PER_USER": "4",
    "MEMORY_MAX_TOKENS": "200",
    "HISTORY": "false",
    "DATA_DIR": "/nonexistent/hostile-data",
    "DATABASE_URL": "postgresql://hostile:hostile@127.0.0.5:5999/hostile",
    "DATABASE_TIMEOUT": "0.25",
    "JOURNAL_DIR": "/nonexistent/hostile-journal",
    "JOURNAL_MAX_MB": "1",
    "SHARE_LINKS": "anyone",
    "VLLM_BASE_URL": "http://127.0.0.3:8003/v1",
    "VLLM_SERVERS": "http://127.0.0.7:8007 http://127.0.0.8:8008",
    "ROUTER_HOST": "127.0.0.9",
    "ROUTER_PORT": "8009",
    "ROUTER_METRICS_PORT": "8019",
    "ROUTER_POLICY": "random",
    "MODEL_NAME": "hostile-model-name",
    "API_KEY": "hostile-key",
    "SYSTEM_PROMPT": "HOSTILE SYSTEM PROMPT",
    "TEMPERATURE": "1.3",
    "TOP_P": "0.3",
    "MAX_TOKENS": "33",
    "REPETITION_PENALTY": "1.7",
    "MAX_TOKENS_LIMIT": "64",
    "CONNECT_TIMEOUT": "0.5",
    "REQUEST_TIMEOUT": "2",
    "READINESS_POLL_SECONDS": "9",
    "STREAM_INTERVAL_MS": "500",
    "STREAM_UPDATES_PER_SECOND": "7",
    "ANSWER_CHECKPOINT_SECONDS": "0",
    "CONTEXT_LOW_WATER": "0.9",
    "RECONNECT_GRACE_SECONDS": "30",
    "LANGUAGE": "zh-CN",
    "GREETING_EN": "HOSTILE GREETING {model}",
    "GREETING_ZH": "敌意问候 {model}",
    "MODEL": "/nonexistent/hostile-model",
    "SERVED_MODEL_NAME": "hostile-served-name",
    "VLLM_HOST": "127.0.0.4",
    "VLLM_PORT": "8004",
    "MAX_MODEL_LEN": "100",
    "MAX_NUM_SEQS": "3",
    "MAX_NUM_BATCHED_TOKENS": "512",
    "DEVICE": "cpu",
    "PROFILE": "dev",
    "DTYPE": "float32",
    "VLLM_EXTRA_ARGS": "--disable-log-stats",
    "VLLM_NICE": "3",
    "QUANT": "int4",
    "ENGINE": "llama.cpp",
}


def documented_variables() -> list[str]:
    """The variables .env.example lists, commented out or not."""
    names = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        name = line.lstrip("# ").split("=", 1)[0]
        if "=" in line and name.isupper() and name.replace("_", "").isalnum():
            names.append(name)
    return names


def main() -> int:
    missing = [name for name in documented_variables() if name not in HOSTILE]
    if missing:
        print(f"hostile_env: no hostile value for {', '.join(missing)}", file=sys.stderr)
        return 1
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".env"
    target.write_text("".join(f"{name}={HOSTILE[name]}\n" for name in documented_variables()))
    print(f"hostile_env: wrote {len(HOSTILE)} settings to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
