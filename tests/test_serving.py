"""The serving planner: flags computed per machine, every command accepted by vLLM's own parser."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from app.config import DEFAULT_DOCUMENT_TOKENS, Settings
from serving.advice import advice
from serving.errors import ServeError
from serving.machine import Machine
from serving.plan import ServeSettings, build_plan
from serving.router import RouterSettings, router_command
from tests.support.plans import ERNIE, GIB, MACHINES, SERVER_VENV, parse_with_vllm
from tests.support.servers import user_make_environment
from tools.run import passages_of_the_plan

ROOT = Path(__file__).resolve().parent.parent


def test_kv_cache_per_token_comes_from_the_config():
    assert ERNIE.kv_bytes_per_token("bfloat16") == 2 * 18 * 2 * 128 * 2 == 18 * 1024
    assert 0.35e9 < ERNIE.parameters < 0.37e9


@pytest.mark.parametrize("name", MACHINES)
def test_plans_per_machine(name):
    machine = MACHINES[name]
    plan = build_plan(ServeSettings(), machine, ERNIE, "/models/ernie", SERVER_VENV)
    argv = plan.argv
    assert argv[argv.index("--served-model-name") + 1] == "baidu/ERNIE-4.5-0.3B-PT"
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "8000"
    assert "--enforce-eager" not in argv
    assert len(plan.reasons) >= 5
    if machine.gpus:
        assert argv[1] == "serve" and "VLLM_CPU_KVCACHE_SPACE" not in plan.env
        kv = int(argv[argv.index("--kv-cache-memory-bytes") + 1])
        assert kv == int(64 * 8192 * 18 * 1024 * 1.1)
        assert "--gpu-memory-utilization" not in argv
        assert argv[argv.index("--stream-interval") + 1] == "4"
    else:
        assert "--stream-interval" not in argv  # a token an event: a CPU's 20-35 tokens/s are the page's pace
        dtype = argv[argv.index("--dtype") + 1]
        assert dtype == ("bfloat16" if machine.has_bf16 else "float32")
        per_token = 18 * 1024 * (1 if dtype == "bfloat16" else 2)  # the cache holds the model's dtype
        assert plan.env["VLLM_CPU_KVCACHE_SPACE"] == str(-(-int(16 * 8192 * per_token * 1.1) // GIB))
        assert plan.env["VLLM_CPU_OMP_THREADS_BIND"] == f"0-{machine.physical_cores - 1}"
        if machine.libraries:
            assert plan.env["LD_PRELOAD"] == "/y/libtcmalloc_minimal.so.4:/x/libiomp5.so"


def test_dev_profile_is_eager_and_api_key_stays_out_of_argv():
    plan = build_plan(ServeSettings(profile="dev", api_key="s3cret"), MACHINES["cpu-2-cores"], ERNIE, "m", SERVER_VENV)
    assert "--enforce-eager" in plan.argv and "s3cret" not in plan.argv
    assert plan.env["VLLM_API_KEY"] == "s3cret" and "s3cret" not in plan.shown()


def test_a_cache_that_cannot_fit_is_refused_with_a_clear_message():
    with pytest.raises(ServeError, match="Lower MAX_MODEL_LEN or MAX_NUM_SEQS"):
        build_plan(ServeSettings(max_model_len=131072, max_num_seqs=64), MACHINES["gpu-24gb"], ERNIE, "m", SERVER_VENV)
    with pytest.raises(ServeError, match="free memory"):
        build_plan(
            ServeSettings(max_model_len=131072, max_num_seqs=16), MACHINES["cpu-2-cores"], ERNIE, "m", SERVER_VENV
        )


def test_vllm_is_niced_below_the_chat_ui_unless_told_otherwise():
    machine = MACHINES["cpu-2-cores"]
    plan = build_plan(ServeSettings(), machine, ERNIE, "m", SERVER_VENV)
    assert plan.nice == 10 and any(r.startswith("nice 10:") for r in plan.reasons)
    plan = build_plan(ServeSettings(vllm_nice=0), machine, ERNIE, "m", SERVER_VENV)
    assert plan.nice == 0 and not any(r.startswith("nice") for r in plan.reasons)


def test_the_running_vllm_and_its_session_are_niced(vllm):
    """The tests start `python -m serving` in a session of its own, as `make run` does."""
    for pid in [vllm.process.pid, *children(vllm.process.pid)]:
        stat = Path(f"/proc/{pid}/stat").read_text()
        assert int(stat[stat.rindex(")") + 2 :].split()[16]) == 10, f"nice of {stat[:60]}"
    autogroup = Path(f"/proc/{vllm.process.pid}/autogroup")
    if autogroup.exists():  # kernels built without autogroup scheduling have no such file
        assert autogroup.read_text().split()[-1] == "10"


def children(pid: int) -> list[int]:
    """Every descendant process of pid (vLLM's engine core and worker)."""
    found = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return found + [grandchild for child in found for grandchild in children(child)]


@pytest.mark.vllm
def test_every_generated_command_is_accepted_by_vllms_parser():
    commands = []
    for machine in MACHINES.values():
        for profile in ("default", "dev"):
            plan = build_plan(
                ServeSettings(profile=profile, max_num_batched_tokens=2048, vllm_extra_args="--enable-log-requests"),
                machine,
                ERNIE,
                "/models/ernie",
                SERVER_VENV,
            )
            args = plan.argv[2:] if plan.argv[1] == "serve" else plan.argv[3:]
            commands.append(args)
    parse_with_vllm(commands)
    with pytest.raises(AssertionError, match="unrecognized arguments"):
        parse_with_vllm([["--model", "m", "--max-modle-len", "5"]])


def test_serve_plan_works_before_the_server_is_installed(tmp_path):
    env = user_make_environment()
    result = subprocess.run(
        ["make", "--no-print-directory", "serve-plan", f"SERVER_VENV={tmp_path / 'absent'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "is not installed yet (make install-server)" in result.stdout
    assert "--served-model-name baidu/ERNIE-4.5-0.3B-PT" in result.stdout and "Traceback" not in result.stderr


def test_the_plan_advises_the_engine_from_this_machines_own_bench_serve(tmp_path):
    flags = frozenset({"avx2", "avx512f"})
    machine = Machine(cpus=2, physical_cores=2, cpu_flags=flags, available_memory_bytes=8 << 30)
    results = tmp_path / "bench-serve.json"
    rows = [
        {"config": "chosen", "single_tps": 20.2, "multi_tps": 93.3},
        {"config": "int8", "single_tps": 35.1, "multi_tps": 128.4},
        {"config": "llama-q4_k_m", "single_tps": 55.1, "multi_tps": 62.0},
    ]
    results.write_text(json.dumps({"cpu": "AMD EPYC", "flags": sorted(flags), "date": "2026-12-02", "rows": rows}))
    said = advice(machine, results)
    assert "one chat is answered fastest by ENGINE=llama.cpp QUANT=int4 (55.1 tok/s)" in said
    assert "most chats at once are served by ENGINE=vllm QUANT=int8 (128.4 tok/s" in said
    other_cpu = dataclasses.replace(machine, cpu_flags=frozenset({"avx2"}))
    assert "make bench-serve measures" in advice(other_cpu, results)
    assert "make bench-serve measures" in advice(machine, tmp_path / "none.json")


def test_the_router_spreads_chats_by_their_key_over_the_servers_listed(tmp_path: Path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "vllm-router").touch()
    settings = RouterSettings(vllm_servers=" http://10.0.0.2:8000/v1/, http://127.0.0.1:8001 ", router_port=8100)
    argv = router_command(settings, str(tmp_path))
    worker_urls = argv[argv.index("--worker-urls") + 1 : argv.index("--policy")]
    assert worker_urls == ["http://10.0.0.2:8000", "http://127.0.0.1:8001"]
    assert argv[argv.index("--policy") + 1] == "consistent_hash" and settings.base_url == "http://127.0.0.1:8100/v1"
    # A dead server leaves the rotation within a second, and the request it refused goes to another one.
    assert argv[argv.index("--health-check-interval-secs") + 1] == "1"
    assert argv[argv.index("--cb-failure-threshold") + 1] == "1"


@pytest.mark.parametrize(
    ("servers", "said"), [("", "VLLM_SERVERS is empty"), ("10.0.0.2:8000", "is not a server's URL")]
)
def test_the_router_refuses_a_list_it_cannot_route_to(tmp_path: Path, servers: str, said: str):
    with pytest.raises(ServeError, match=said):
        router_command(RouterSettings(vllm_servers=servers), str(tmp_path))


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("0.0.0.0", "http://127.0.0.1:8100/v1"),
        ("::", "http://127.0.0.1:8100/v1"),
        ("127.0.0.9", "http://127.0.0.9:8100/v1"),
        ("::1", "http://[::1]:8100/v1"),
        ("router.internal", "http://router.internal:8100/v1"),
    ],
)
def test_the_app_reaches_the_router_where_it_listens(host: str, url: str):
    assert RouterSettings(router_host=host).base_url == url


@pytest.mark.parametrize("name", MACHINES)
def test_the_plan_says_the_passage_budget_its_device_affords(name):
    machine = MACHINES[name]
    plan = build_plan(ServeSettings(), machine, ERNIE, "/models/ernie", SERVER_VENV)
    budget = 0 if machine.gpus else DEFAULT_DOCUMENT_TOKENS  # a GPU: DOCUMENT_SHARE of the room alone
    assert any(reason.startswith(f"documents: DOCUMENT_TOKENS={budget} for the chat app") for reason in plan.reasons)


@pytest.mark.parametrize(("device", "budget"), [("cpu", DEFAULT_DOCUMENT_TOKENS), ("gpu", 0)])
def test_make_run_hands_the_app_the_plans_passage_budget_unless_one_is_set(monkeypatch, device, budget):
    monkeypatch.setenv("DEVICE", device)
    assert passages_of_the_plan(Settings()) == {"DOCUMENT_TOKENS": str(budget)}
    assert passages_of_the_plan(Settings(document_tokens=500)) == {}  # the operator's own
