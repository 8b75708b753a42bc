"""The engines' hand-off (registry_db.resolve.engines): each engine's exact output for a profile
whose rates were derived and for one whose rates were stored, the decimal cases, and the shell
form. No database: a Resolution is built as the resolver builds one."""

from __future__ import annotations

import json
import shlex

import pytest

from registry_db.errors import UsageError
from registry_db.resolve.engines import ENGINES, engine_settings, minus_one_text, number_text
from registry_db.resolve.plan import Resolution
from registry_db.resolve.rates import complete


def resolution(al: float, k: int = 5, rates: tuple[float, ...] | None = None) -> Resolution:
    """What the resolver answers for a stored profile: its AL, and its rates or derived ones."""
    _, rate, per_position, derived = complete(k, acceptance_length=al, acceptance_rate=None,
                                              per_position_rates=rates)
    return Resolution(al, rate, k, per_position, derived, "registry", "s", "p", None)


DERIVED = resolution(4.07)
STORED = resolution(2.78, k=3, rates=(0.9, 0.6, 0.28))


def text(r: Resolution, engine: str, shell: bool = False, allow_inexact: bool = False) -> str:
    return "\n".join(engine_settings(r, engine, allow_inexact=allow_inexact).lines(shell))


def test_the_table_has_one_row_per_engine():
    assert list(ENGINES) == ["vllm", "sglang", "trtllm", "atom", "tilert", "blis"]


@pytest.mark.parametrize("engine, derived, stored", [
    ("vllm",
     '{"num_speculative_tokens": 5, "rejection_sample_method": "synthetic", '
     '"synthetic_acceptance_length": 4.07}',
     # Stored rates: the whole distribution instead of the length (vLLM takes one of the two).
     '{"num_speculative_tokens": 3, "rejection_sample_method": "synthetic", '
     '"synthetic_acceptance_rates": [0.9, 0.6, 0.28]}'),
    ("sglang",
     "SGLANG_SIMULATE_ACC_LEN=4.07\nSGLANG_SIMULATE_ACC_METHOD=match-expected\n"
     "SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token",
     "SGLANG_SIMULATE_ACC_LEN=2.78\nSGLANG_SIMULATE_ACC_METHOD=match-expected\n"
     "SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token"),
    ("trtllm", "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3.07",
     "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=1.78"),
    ("atom", "--spec-decode-acceptance-length 4.07", "--spec-decode-acceptance-length 2.78"),
    ("tilert", "TILERT_SIMULATE_ACC_LEN=4.07\nTILERT_SIMULATE_ACC_METHOD=match-expected",
     "TILERT_SIMULATE_ACC_LEN=2.78\nTILERT_SIMULATE_ACC_METHOD=match-expected"),
    # (4.07 - 1) / 5 = 0.614 and (2.78 - 1) / 3 = 0.5933..., computed in decimal.
    ("blis", "--num-speculative-tokens 5 --speculative-acceptance-rate 0.614",
     "--num-speculative-tokens 3 --speculative-acceptance-rate 0.5933333333333334"),
])
def test_each_engine_for_derived_and_stored_rates(engine, derived, stored):
    assert DERIVED.rates_derived and not STORED.rates_derived
    assert text(DERIVED, engine) == derived
    assert text(STORED, engine) == stored


@pytest.mark.parametrize("al, k, shown, minus_one", [
    (2.78, 3, "2.78", "1.78"),   # float arithmetic would say 1.7799999999999998
    (3.51, 5, "3.51", "2.51"),   # ... and 2.5099999999999998
    (1.0, 4, "1", "0"),          # nothing accepted; whole numbers without .0
    (6.0, 5, "6", "5"),          # K + 1: every draft accepted
])
def test_numbers_are_the_shortest_decimal_and_al_minus_1_is_decimal(al, k, shown, minus_one):
    r = resolution(al, k)
    assert text(r, "sglang").splitlines()[0] == f"SGLANG_SIMULATE_ACC_LEN={shown}"
    # AL 1 is refused for TensorRT-LLM (0 forces nothing there); asked for, its text is "0".
    assert text(r, "trtllm", allow_inexact=al == 1) == (
        f"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS={minus_one}")
    assert text(r, "atom") == f"--spec-decode-acceptance-length {shown}"
    config = json.loads(text(r, "vllm"))
    assert config["synthetic_acceptance_length"] == al and config["num_speculative_tokens"] == k


def test_al_minus_1_never_shows_an_exponent():
    assert minus_one_text(1.0000000000000002) == "0.0000000000000002"
    assert number_text(1e-05) == "0.00001" and number_text(4.0) == "4"


def test_a_whole_forced_count_is_an_integer_for_tensorrt_llms_int_parser():
    """AL 4.0: TensorRT-LLM's two-model path reads the variable with int(...)
    (NVIDIA/TensorRT-LLM 00b6d5a25c30b4382d24fbdf52956d601b3ffd24,
    tensorrt_llm/_torch/speculative/interface.py, get_force_num_accepted_tokens), where "3.0"
    fails and forces zero accepted tokens. "3" is what it takes, with no warning."""
    settings = engine_settings(resolution(4.0), "trtllm")
    assert settings.lines() == ["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3"]
    assert int(settings.entries[0][1]) == 3 and settings.warnings == ()


def test_a_fractional_forced_count_is_said_not_hidden():
    """Only the one-model path (get_force_num_accepted_tokens_float) takes 3.07; the warning
    says what the two-model path does with it."""
    settings = engine_settings(resolution(4.07), "trtllm")
    assert settings.lines() == ["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3.07"]
    (warning,) = settings.warnings
    assert warning.startswith("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3.07 is not a whole")
    assert "int(...)" in warning and "0 accepted tokens" in warning
    assert settings.to_json()["warnings"] == [warning]
    assert engine_settings(resolution(4.07), "sglang").warnings == ()


@pytest.mark.parametrize("al, k, rate", [
    (4.07, 5, "0.614"),          # 3.07 / 5 exactly; float (4.07 - 1) / 5 is 0.6140000000000001
    (1.0, 3, "0"),               # whole numbers without .0 in flags
    (4.0, 3, "1"),
    (2.99, 3, "0.6633333333333333"),
])
def test_blis_takes_k_and_the_acceptance_rate_in_decimal(al, k, rate):
    """inference-sim's flags (inference-sim/inference-sim PR 1538, 730fc28c8540f7e5a23a1c8d09a0
    9c3ec46b0f50, cmd/root.go: --num-speculative-tokens int, --speculative-acceptance-rate
    float64 in [0, 1]; docs/guide/latency-models.md: alpha is the mean fraction accepted)."""
    assert text(resolution(al, k), "blis") == (
        f"--num-speculative-tokens {k} --speculative-acceptance-rate {rate}")


def test_blis_keeps_a_stated_rate_as_stated():
    # AL from 0.7 at K 3 is 3.0999999999999996; re-deriving the rate from it gives 0.69999...98
    assert text(inline(3, acceptance_rate=0.7), "blis") == (
        "--num-speculative-tokens 3 --speculative-acceptance-rate 0.7")


# --- InferenceX's injectors, value by value --------------------------------------------------
# SemiAnalysisAI/InferenceX 843c6254ff69b567f772f6a5fd97675af3d04431:
#   runners/synthetic_injectors/sglang.py writes SGLANG_SIMULATE_ACC_LEN: "{al:g}";
#   runners/synthetic_injectors/vllm.py sets spec["synthetic_acceptance_length"] = al (a float)
#   and writes json.dumps(spec);
#   golden_al_distribution/README.md: TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS is "the golden
#   AL minus 1" (3.5 -> 2.5); that snapshot has no TensorRT-LLM injector, so its text is the
#   issue's {al - 1:g}. ATOM's --spec-decode-acceptance-length "takes the golden AL directly".
# `al` there is a float (inject_synthetic_acceptance.py: float(explicit) or float(al)).

CASES = [(al, k) for al in (1.0, 2.99, 4.0, 4.07) for k in range(1, 9) if al <= k + 1] + [
    (float(k + 1), k) for k in range(1, 9)]


@pytest.mark.parametrize("al, k", CASES)
def test_every_engine_matches_inferencex_value_by_value(al, k):
    r = resolution(al, k)
    env = dict(line.split("=", 1) for line in text(r, "sglang").splitlines())
    assert env["SGLANG_SIMULATE_ACC_LEN"] == f"{al:g}"
    assert text(r, "trtllm", allow_inexact=al == 1) == (
        f"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS={al - 1:g}")
    assert text(r, "atom") == f"--spec-decode-acceptance-length {al:g}"
    spec = {"num_speculative_tokens": k, "rejection_sample_method": "synthetic",
            "synthetic_acceptance_length": al}
    assert json.loads(text(r, "vllm")) == json.loads(json.dumps(spec))
    assert text(r, "vllm").endswith(f'"synthetic_acceptance_length": {json.dumps(al)}}}')
    # Whole numbers are integers, as InferenceX's :g writes them.
    if al == int(al):
        assert env["SGLANG_SIMULATE_ACC_LEN"] == str(int(al))


def test_ours_keeps_the_digits_g_drops():
    r = resolution(2.123456789, 3)
    assert f"{2.123456789:g}" == "2.12346"
    assert text(r, "sglang").splitlines()[0] == "SGLANG_SIMULATE_ACC_LEN=2.123456789"
    assert text(r, "trtllm") == "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=1.123456789"


def inline(k: int, **stated) -> Resolution:
    """What the resolver answers for an inline value stating ``stated`` at ``k``."""
    al, rate, rates, derived = complete(k, **{"acceptance_length": None, "acceptance_rate": None,
                                              "per_position_rates": None, **stated})
    return Resolution(al, rate, k, rates, derived, "cli", None, None, None)


def test_inline_length_or_rate_gives_vllm_the_length_and_stated_rates_the_rates():
    assert "synthetic_acceptance_length" in json.loads(text(inline(4, acceptance_rate=0.5),
                                                            "vllm"))
    assert "synthetic_acceptance_length" in json.loads(text(inline(4, acceptance_length=2.5),
                                                            "vllm"))
    stated = inline(2, per_position_rates=(1.0, 0.25))
    assert json.loads(text(stated, "vllm"))["synthetic_acceptance_rates"] == [1.0, 0.25]


def test_json_forms():
    assert engine_settings(DERIVED, "sglang").to_json() == {"engine": "sglang", "env": {
        "SGLANG_SIMULATE_ACC_LEN": "4.07", "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
        "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}, "warnings": []}
    trtllm = engine_settings(STORED, "trtllm").to_json()
    assert trtllm["env"] == {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "1.78"}
    assert engine_settings(DERIVED, "vllm").to_json() == {"engine": "vllm", "speculative_config": {
        "num_speculative_tokens": 5, "rejection_sample_method": "synthetic",
        "synthetic_acceptance_length": 4.07}, "warnings": []}
    assert engine_settings(DERIVED, "atom").to_json() == {
        "engine": "atom", "args": ["--spec-decode-acceptance-length", "4.07"], "warnings": []}


def test_knobs_are_text_by_name_for_the_batch():
    assert engine_settings(DERIVED, "blis").knobs() == {
        "--num-speculative-tokens": "5", "--speculative-acceptance-rate": "0.614"}
    # vLLM's values are each their JSON text, strings quoted: json.loads reads every one.
    assert engine_settings(DERIVED, "vllm").knobs() == {
        "num_speculative_tokens": "5", "rejection_sample_method": '"synthetic"',
        "synthetic_acceptance_length": "4.07"}
    assert engine_settings(STORED, "vllm").knobs()["synthetic_acceptance_rates"] == (
        "[0.9, 0.6, 0.28]")
    assert engine_settings(resolution(4.0, 3), "trtllm").knobs() == {
        "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "3"}


def test_shell_form_exports_and_quotes():
    assert text(DERIVED, "tilert", shell=True) == (
        "export TILERT_SIMULATE_ACC_LEN=4.07\n"
        "export TILERT_SIMULATE_ACC_METHOD=match-expected")
    # No environment: a shell variable to put on the command line, not a word eval would run.
    vllm = text(DERIVED, "vllm", shell=True)
    assert vllm.startswith("SPECULATIVE_CONFIG='{")
    assert shlex.split(vllm) == [f"SPECULATIVE_CONFIG={text(DERIVED, 'vllm')}"]
    assert text(DERIVED, "atom", shell=True) == (
        "SPECULATIVE_ARGS='--spec-decode-acceptance-length 4.07'")
    assert text(DERIVED, "blis", shell=True) == (
        "SPECULATIVE_ARGS='--num-speculative-tokens 5 --speculative-acceptance-rate 0.614'")


def test_shell_quoting_of_a_value_that_needs_it(monkeypatch):
    """A value with shell syntax in it is quoted, so `eval` sets it and runs nothing."""
    from registry_db.resolve import engines

    monkeypatch.setitem(engines.ENGINES, "odd", engines.EngineRow(
        "env", (("ODD_METHOD", "a b; rm -rf x"), ("ODD_LEN", engines.AL)),
        lambda entries, k: float(entries["ODD_LEN"]), "Odd"))
    assert text(DERIVED, "odd", shell=True) == (
        "export ODD_METHOD='a b; rm -rf x'\nexport ODD_LEN=4.07")
    monkeypatch.setitem(engines.ENGINES, "odder", engines.EngineRow(
        "env", (("ODD $(x)", "v"),), lambda entries, k: 4.07, "Odder"))
    assert text(DERIVED, "odder", shell=True) == "export 'ODD $(x)'=v"   # nothing raw


def test_unknown_engine_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown engine 'hf'; one of vllm, sglang"):
        engine_settings(DERIVED, "hf")
