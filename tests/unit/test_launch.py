"""The command ``registry exec`` starts (registry_db.resolve.launch): each engine's hand-off
applied to a command and an environment, vLLM's settings merged into the command's own
``--speculative-config``, and the refusal of a command whose K, or whose own settings,
contradict the hand-off. No database: a Resolution is built as the resolver builds one.

vLLM's spellings follow vllm-project/vllm vllm/engine/arg_utils.py
(``add_argument("--speculative-config", "-sc", ...)`` with ``type=json.loads``; the
``--spec-method``/``--spec-model``/``--spec-tokens`` shorthands exclude it) and its
FlexibleArgumentParser, which reads ``_`` in an option name as ``-``."""

from __future__ import annotations

import json

import pytest

from registry_db.errors import ResolutionRefused, UsageError
from registry_db.resolve.engines import engine_settings
from registry_db.resolve.launch import command_with_handoff, merged_config
from registry_db.resolve.plan import Resolution
from registry_db.resolve.rates import complete

ENV = {"PATH": "/usr/bin", "SGLANG_SIMULATE_ACC_LEN": "9"}


def resolution(al: float = 4.07, k: int = 5) -> Resolution:
    _, rate, rates, derived = complete(k, acceptance_length=al)
    return Resolution(al, rate, k, rates, derived, "registry", "s", "p", None)


def launch(engine: str, argv: list[str], r: Resolution | None = None, **kw):
    r = r or resolution()
    return command_with_handoff(engine_settings(r, engine), argv, ENV, r.num_spec_tokens, **kw)


OURS = {"num_speculative_tokens": 5, "rejection_sample_method": "synthetic",
        "synthetic_acceptance_length": 4.07}


@pytest.mark.parametrize("engine, variables", [
    ("sglang", {"SGLANG_SIMULATE_ACC_LEN": "4.07", "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
                "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}),
    ("trtllm", {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "3.07"}),
    ("tilert", {"TILERT_SIMULATE_ACC_LEN": "4.07",
                "TILERT_SIMULATE_ACC_METHOD": "match-expected"}),
])
def test_environment_engines_get_their_variables_over_the_callers(engine, variables):
    argv, env = launch(engine, ["serve", "--x", "1"])
    assert argv == ["serve", "--x", "1"]
    assert env == {**ENV, **variables}    # the caller's SGLANG_SIMULATE_ACC_LEN=9 replaced


@pytest.mark.parametrize("form", [
    ["--speculative-config", "{C}"], ["--speculative_config", "{C}"], ["-sc", "{C}"],
    ["--speculative-config={C}"], ["-sc={C}"],
])
def test_vllm_merges_into_the_commands_own_config_keeping_its_keys(form):
    theirs = {"method": "dspark", "model": "org/draft", "num_speculative_tokens": 5,
              "draft_sample_method": "probabilistic", "rejection_sample_method": "block",
              "synthetic_acceptance_rates": [1.0]}
    given = [part.replace("{C}", json.dumps(theirs)) for part in form]
    argv, env = launch("vllm", ["vllm", "serve", "m", *given, "--port", "8000"])
    flag = form[0].split("=")[0]
    at = argv.index(flag)
    assert argv[:at] == ["vllm", "serve", "m"] and argv[at + 2:] == ["--port", "8000"]
    merged = json.loads(argv[at + 1])
    # Its keys kept in order, the hand-off's replacing a method and a stale synthetic setting.
    assert merged == {"method": "dspark", "model": "org/draft", "num_speculative_tokens": 5,
                      "draft_sample_method": "probabilistic",
                      "rejection_sample_method": "synthetic",
                      "synthetic_acceptance_length": 4.07}
    assert list(merged)[:2] == ["method", "model"] and env == ENV


def test_vllm_without_a_config_gets_one_appended_merged_into_into():
    argv, _ = launch("vllm", ["vllm", "serve", "m"])
    assert argv[:3] == ["vllm", "serve", "m"] and argv[3] == "--speculative-config"
    assert json.loads(argv[4]) == OURS
    argv, _ = launch("vllm", ["vllm", "serve", "m"], into={"method": "mtp", "model": "d"})
    assert json.loads(argv[4]) == {"method": "mtp", "model": "d", **OURS}


@pytest.mark.parametrize("given", [4, "5", True, 5.5])
def test_vllm_refuses_a_conflicting_k(given):
    config = json.dumps({"method": "mtp", "num_speculative_tokens": given})
    with pytest.raises(ResolutionRefused) as info:
        launch("vllm", ["vllm", "serve", "--speculative-config", config])
    assert info.value.reason == "k_mismatch"
    assert f"num_speculative_tokens {json.dumps(given)}" in info.value.message
    with pytest.raises(ResolutionRefused):
        launch("vllm", ["vllm", "serve"], into={"num_speculative_tokens": given})


@pytest.mark.parametrize("argv, needle", [
    (["vllm", "-sc", "{", "x"], "not JSON"),
    (["vllm", "-sc", "[1]"], "a speculative config is a JSON object"),
    (["vllm", "-sc", "{}", "--speculative-config", "{}"], "more than once"),
    (["vllm", "--speculative-config.method", "mtp"], "as one JSON object"),
    (["vllm", "--spec-tokens", "5"], "--spec-tokens"),
    (["vllm", "--speculative-config"], "without a value"),
])
def test_vllm_refuses_what_it_cannot_merge_exactly(argv, needle):
    with pytest.raises(UsageError, match=needle):
        launch("vllm", argv)


def test_vllm_with_its_own_config_takes_no_into():
    with pytest.raises(UsageError, match="drop --into"):
        launch("vllm", ["vllm", "-sc", "{}"], into={})


def test_merged_config_is_the_whole_object():
    settings = engine_settings(resolution(), "vllm")
    assert merged_config(settings, {"model": "d", "synthetic_acceptance_length": 2,
                                    "num_speculative_tokens": 5.0}) == {
        "model": "d", **OURS}


def test_argument_engines_append_and_check_k():
    argv, env = launch("atom", ["atom", "--num-speculative-tokens", "5"])
    assert argv == ["atom", "--num-speculative-tokens", "5",
                    "--spec-decode-acceptance-length", "4.07"] and env == ENV
    # BLIS's own K flag, given the same, is not repeated.
    argv, _ = launch("blis", ["blis", "run", "--num-speculative-tokens=5"])
    assert argv == ["blis", "run", "--num-speculative-tokens=5",
                    "--speculative-acceptance-rate", "0.614"]
    # Already given with the same value: kept once.
    argv, _ = launch("atom", ["atom", "--spec-decode-acceptance-length", "4.070"])
    assert argv == ["atom", "--spec-decode-acceptance-length", "4.070"]


@pytest.mark.parametrize("engine, argv", [
    ("atom", ["atom", "--num-speculative-tokens", "4"]),
    ("atom", ["atom", "--num-speculative-tokens=6"]),
    ("blis", ["blis", "--num-speculative-tokens", "3"]),
    ("sglang", ["python", "-m", "sglang.launch_server", "--speculative-num-steps", "3"]),
])
def test_a_command_that_states_another_k_is_refused(engine, argv):
    with pytest.raises(ResolutionRefused) as info:
        launch(engine, argv)
    assert info.value.reason == "k_mismatch" and "the resolved acceptance is for K 5" in \
        info.value.message


def test_a_command_that_gives_another_value_of_ours_is_refused():
    with pytest.raises(UsageError, match="the hand-off is --spec-decode-acceptance-length 4.07"):
        launch("atom", ["atom", "--spec-decode-acceptance-length", "3"])
    with pytest.raises(UsageError, match="drop it from the command"):
        launch("blis", ["blis", "--speculative-acceptance-rate", "0.5"])


def test_a_command_that_sets_a_variable_of_ours_itself_is_refused():
    """`env SGLANG_SIMULATE_ACC_LEN=9 ...` in the command would win over the hand-off."""
    with pytest.raises(UsageError, match="the command sets SGLANG_SIMULATE_ACC_LEN itself"):
        launch("sglang", ["env", "SGLANG_SIMULATE_ACC_LEN=9", "python", "-m", "sglang"])
    argv, _ = launch("sglang", ["env", "OTHER=1", "python"])
    assert argv == ["env", "OTHER=1", "python"]
