"""``registry exec``, run as a user runs it (a real process that execs): the started command
sees exactly the documented hand-off for each of the six engines, and a refusal (of the run, of
an inexact hand-off, of a K the command contradicts) starts nothing and exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DSV, GLM, build_seed

OFF = [*DSV, "--thinking", "off", "--category", "coding"]   # the seed's AL 4.07 at K 5
#: What the started process prints: its environment and its arguments.
DUMP = "import json, os, sys; print(json.dumps({'env': dict(os.environ), 'argv': sys.argv[1:]}))"
#: A minimal environment (a UTF-8 locale, so that no Python coerces one into it).
BASE = {"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"}


@pytest.fixture
def url(shared_url):
    """The seeded registry's URL, shared with the other tests that only read it."""
    return shared_url("seed", build_seed)


def registry(url: str, *args: str, env: dict[str, str] | None = None,
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "registry_db", "-d", url, *args],
                          capture_output=True, text=True, env={**BASE, **(env or {})},
                          timeout=120, cwd=Path(__file__).resolve().parent)


def started(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("engine_name, variables, argv", [
    ("sglang", {"SGLANG_SIMULATE_ACC_LEN": "4.07", "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
                "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}, ["serve"]),
    ("trtllm", {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "3.07"}, ["serve"]),
    ("tilert", {"TILERT_SIMULATE_ACC_LEN": "4.07",
                "TILERT_SIMULATE_ACC_METHOD": "match-expected"}, ["serve"]),
    ("atom", {}, ["serve", "--spec-decode-acceptance-length", "4.07"]),
    ("blis", {}, ["serve", "--num-speculative-tokens", "5",
                  "--speculative-acceptance-rate", "0.614"]),
    ("vllm", {}, ["serve", "--speculative-config", json.dumps({
        "method": "dspark", "model": "org/draft", "num_speculative_tokens": 5,
        "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 4.07})]),
])
def test_the_started_command_sees_exactly_the_documented_hand_off(url, engine_name, variables,
                                                                    argv):
    own = ["--speculative-config", json.dumps({"method": "dspark", "model": "org/draft",
                                               "num_speculative_tokens": 5})]
    command = [sys.executable, "-c", DUMP, "serve", *(own if engine_name == "vllm" else [])]
    result = registry(url, "exec", *OFF, "--emit", engine_name, "--", *command)
    seen = started(result)
    assert seen["env"] == {**BASE, **variables}
    assert seen["argv"] == argv
    # TensorRT-LLM's fractional count is warned of, as --emit does; nothing else is said.
    assert ("not a whole number" in result.stderr) == (engine_name == "trtllm")


def test_a_refused_run_starts_nothing(url):
    result = registry(url, "exec", *GLM, "--category", "chat", "--emit", "sglang", "--",
                      "sh", "-c", "echo started")
    assert result.returncode == 1 and "started" not in result.stdout
    assert result.stderr.startswith("refused (no_match): ")


def test_an_inexact_hand_off_starts_nothing_unless_asked_for(url):
    """TensorRT-LLM at AL 1: TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0 forces nothing."""
    run = ["exec", *GLM, "--category", "coding", "--acceptance-length", "1", "--emit", "trtllm"]
    result = registry(url, *run, "--", "sh", "-c", "echo started")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("refused (inexact_handoff): TensorRT-LLM reads ")
    allowed = registry(url, *run, "--allow-inexact", "--", sys.executable, "-c", DUMP)
    assert started(allowed)["env"]["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"] == "0"
    assert "warning: TensorRT-LLM reads" in allowed.stderr


@pytest.mark.parametrize("engine_name, command", [
    ("vllm", ["--speculative-config", '{"method": "dspark", "num_speculative_tokens": 4}']),
    ("atom", ["--num-speculative-tokens", "4"]),
    ("sglang", ["--speculative-num-steps=4"]),
])
def test_a_command_with_another_k_starts_nothing(url, engine_name, command):
    result = registry(url, "exec", *OFF, "--emit", engine_name, "--", "sh", "-c",
                      "echo started", "sh", *command)
    assert result.returncode == 1 and "started" not in result.stdout
    assert result.stderr.startswith("refused (k_mismatch): the ")
    assert "the resolved acceptance is for K 5" in result.stderr


def test_into_is_merged_when_the_command_has_no_config(url, tmp_path):
    config = tmp_path / "spec.json"
    config.write_text('{"method": "dspark", "model": "org/draft"}')
    seen = started(registry(url, "exec", *OFF, "--emit", "vllm", "--into", str(config), "--",
                            sys.executable, "-c", DUMP))
    assert seen["argv"] == ["--speculative-config", json.dumps({
        "method": "dspark", "model": "org/draft", "num_speculative_tokens": 5,
        "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 4.07})]


@pytest.mark.parametrize("args, code, needle", [
    ([*OFF, "--emit", "sglang", "--", "no-such-command-registry-test"], 127, "cannot run"),
    ([*OFF, "--emit", "sglang"], 2, "Missing argument"),
    ([*OFF, "--emit", "atom", "--into", "{}", "--", "true"], 2, "give --emit vllm"),
    ([*OFF, "--emit", "vllm", "--", "sh", "--spec-tokens", "5"], 2, "--spec-tokens"),
])
def test_exec_errors(url, args, code, needle):
    result = registry(url, "exec", *args)
    assert result.returncode == code and needle in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
