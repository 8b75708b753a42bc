"""``registry resolve --emit ENGINE [--shell]`` on both backends: what the engine takes instead
of the answer, its --json wrapping, its shell form, refusals and usage errors."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.helpers import DSV, GLM, build_seed, seed_answer
from tests.helpers import run_resolve as run


@pytest.fixture
def url(shared_url):
    """A registry holding the seed, shared by the tests that only read it."""
    return shared_url("seed", build_seed)


OFF = [*DSV, "--thinking", "off", "--category", "coding"]   # the seed's AL 4.07, rates derived


@pytest.mark.parametrize("name, expected", [
    ("vllm", '{"num_speculative_tokens": 5, "rejection_sample_method": "synthetic", '
             '"synthetic_acceptance_length": 4.07}\n'),
    ("sglang", "SGLANG_SIMULATE_ACC_LEN=4.07\nSGLANG_SIMULATE_ACC_METHOD=match-expected\n"
               "SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token\n"),
    ("trtllm", "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3.07\n"),
    ("atom", "--spec-decode-acceptance-length 4.07\n"),
    ("tilert", "TILERT_SIMULATE_ACC_LEN=4.07\nTILERT_SIMULATE_ACC_METHOD=match-expected\n"),
    ("blis", "--num-speculative-tokens 5 --speculative-acceptance-rate 0.614\n"),
])
def test_emit_prints_what_the_engine_takes(url, name, expected):
    result = run(url, *OFF, "--emit", name)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    # A fractional forced count is said on stderr: TensorRT-LLM's two-model path cannot take it.
    warned = "not a whole number" in result.stderr
    assert warned == (name == "trtllm") and "note" not in result.stderr


def test_emit_stated_rates_give_vllm_the_rates(url):
    result = run(url, *GLM, "--per-position-rates", "0.9,0.6,0.28", "--emit", "vllm")
    assert json.loads(result.stdout) == {
        "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": [0.9, 0.6, 0.28]}
    # The length a run states is decimal text: 2.78 - 1 is 1.78 for TensorRT-LLM.
    assert run(url, *GLM, "--acceptance-length", "2.78", "--emit", "trtllm").stdout == (
        "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=1.78\n")


@pytest.mark.parametrize("name, key, value", [
    ("sglang", "env", {"SGLANG_SIMULATE_ACC_LEN": "4.07",
                       "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
                       "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}),
    ("vllm", "speculative_config", {"num_speculative_tokens": 5,
                                    "rejection_sample_method": "synthetic",
                                    "synthetic_acceptance_length": 4.07}),
    ("atom", "args", ["--spec-decode-acceptance-length", "4.07"]),
])
def test_emit_with_json_wraps_it_beside_the_resolution(url, name, key, value):
    result = run(url, *OFF, "--emit", name, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"engine": name, key: value, "warnings": [],
                                         "resolution": seed_answer()}


def test_emit_shell_exports_and_quotes(url):
    result = run(url, *OFF, "--emit", "tilert", "--shell")
    assert result.stdout == ("export TILERT_SIMULATE_ACC_LEN=4.07\n"
                             "export TILERT_SIMULATE_ACC_METHOD=match-expected\n")
    # vLLM's object is a shell variable for --speculative-config "$SPECULATIVE_CONFIG".
    vllm = run(url, *OFF, "--emit", "vllm", "--shell").stdout
    name, value = shlex.split(vllm)[0].split("=", 1)
    assert name == "SPECULATIVE_CONFIG" and json.loads(value)["synthetic_acceptance_length"] == 4.07


def test_emit_notes_go_to_stderr(url):
    result = run(url, *OFF, "--hardware", "h200", "--emit", "trtllm", "--shell")
    assert result.stdout == "export TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3.07\n"
    note, warning = result.stderr.splitlines()
    assert note == ("note: the profile was measured on b300 and the run is on h200; "
                    "acceptance is reused across hardware")
    assert warning.startswith("warning: TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3.07 is not "
                              "a whole number: ") and "int(...)" in warning


def test_emit_a_whole_forced_count_as_an_integer(url):
    result = run(url, *GLM, "--acceptance-length", "4", "--emit", "trtllm")
    assert result.stdout == "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3\n"
    assert result.stderr == ""
    as_json = json.loads(run(url, *GLM, "--acceptance-length", "3.07", "--emit", "trtllm",
                             "--json").stdout)
    assert as_json["env"] == {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "2.07"}
    assert len(as_json["warnings"]) == 1


def test_a_refusal_with_emit_stays_exit_1_with_its_reason(url):
    result = run(url, *GLM, "--category", "chat", "--emit", "sglang")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("refused (no_match): ")
    as_json = run(url, *GLM, "--category", "chat", "--emit", "sglang", "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["refused"]["reason"] == "no_match"


@pytest.mark.parametrize("args, needle", [
    ([*OFF, "--shell"], "--shell goes with --emit ENGINE"),
    # --batch --emit is an answer per line now (issue 25); only --shell stays one run's.
    (["--batch", "-", "--emit", "vllm", "--shell"], "drop --shell"),
    ([*OFF, "--emit", "hf"],
     "'hf' is not one of 'vllm', 'sglang', 'trtllm', 'atom', 'tilert', 'blis'"),
])
def test_emit_usage_errors_exit_2(url, args, needle):
    result = run(url, *args)
    assert result.exit_code == 2 and needle in result.stderr, result.stderr


INTO = {"method": "dspark", "model": "org/draft", "num_speculative_tokens": 5,
        "draft_sample_method": "probabilistic"}
WHOLE = {**INTO, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 4.07}


def test_into_prints_the_whole_speculative_config(url, tmp_path):
    inline = run(url, *OFF, "--emit", "vllm", "--into", json.dumps(INTO))
    assert inline.exit_code == 0 and json.loads(inline.stdout) == WHOLE
    assert list(json.loads(inline.stdout)) == list(WHOLE)      # the given keys keep their order
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(INTO, indent=2))
    assert json.loads(run(url, *OFF, "--emit", "vllm", "--into", str(path)).stdout) == WHOLE
    shell = run(url, *OFF, "--emit", "vllm", "--into", str(path), "--shell").stdout
    assert shlex.split(shell) == [f"SPECULATIVE_CONFIG={json.dumps(WHOLE)}"]
    as_json = json.loads(run(url, *OFF, "--emit", "vllm", "--into", str(path), "--json").stdout)
    assert as_json["speculative_config"] == WHOLE


def test_into_refuses_a_conflicting_k(url):
    result = run(url, *OFF, "--emit", "vllm", "--into", '{"num_speculative_tokens": 3}')
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == ("refused (k_mismatch): the speculative config gives "
                             "num_speculative_tokens 3, the resolved acceptance is for K 5\n")


@pytest.mark.parametrize("content, code, needle", [
    ('{"method": "mtp",\n  "model": }', 1, "spec.json:2:12: (document): not JSON"),
    ("[1, 2]", 1, "a speculative config is a JSON object, not list"),
    (None, 1, "cannot read the speculative config"),
])
def test_into_a_file_that_is_no_config_is_one_line(url, tmp_path, content, code, needle):
    path = tmp_path / "spec.json"
    if content is not None:
        path.write_text(content)
    result = run(url, *OFF, "--emit", "vllm", "--into", str(path))
    assert result.exit_code == code and needle in result.stderr and result.stdout == ""


@pytest.mark.parametrize("args, needle", [
    ([*OFF, "--emit", "sglang", "--into", "{}"], "give --emit vllm"),
    ([*OFF, "--into", "{}"], "give --emit vllm"),
    ([*OFF, "--emit", "vllm", "--into", "{nope"], "--into: not JSON"),
    ([*OFF, "--allow-inexact"], "--allow-inexact goes with --emit"),
    (["--batch", "-", "--emit", "vllm", "--into", "{}"], "drop it with --batch"),
])
def test_into_usage_errors_exit_2(url, args, needle):
    result = run(url, *args)
    assert result.exit_code == 2 and needle in result.stderr, result.stderr


def test_an_inexact_hand_off_is_refused_with_what_the_engine_would_do(url):
    """TensorRT-LLM at AL 1: 0 forced draft tokens is TensorRT-LLM's "not forcing"."""
    one = [*GLM, "--category", "coding", "--acceptance-length", "1", "--emit", "trtllm"]
    result = run(url, *one)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "refused (inexact_handoff): TensorRT-LLM reads TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"
        "=0 as not forcing acceptance: the run would measure its real acceptance, not the "
        "resolved AL 1; --allow-inexact hands it over anyway\n")
    as_json = run(url, *one, "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["refused"]["reason"] == "inexact_handoff"
    allowed = run(url, *one, "--allow-inexact")
    assert allowed.exit_code == 0
    assert allowed.stdout == "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0\n"
    assert allowed.stderr.startswith("warning: TensorRT-LLM reads ")
    # Every other engine realises AL 1.
    for name in ("vllm", "sglang", "atom", "tilert", "blis"):
        assert run(url, *one[:-1], name).exit_code == 0


def test_a_deployment_whose_pool_is_inexact_is_refused_naming_the_pool(url, tmp_path):
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text("pools:\n  - name: decode\n    engine:\n      speculative:\n"
                      "        method: mtp\n        num_spec_tokens: 3\n")
    args = ["--model", "glm-5.3", "--thinking", "on", "--category", "coding", "--k", "3",
            "--acceptance-length", "1", "--deployment", str(deploy), "--emit", "trtllm"]
    result = run(url, *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("refused (inexact_handoff): pool 'decode': TensorRT-LLM ")
