"""The engines' hand-off (registry_db.resolve.engines): each engine's exact output for a profile
whose rates were derived and for one whose rates were stored, the decimal cases, and the shell
form. No database: a Resolution is built as the resolver builds one."""

from __future__ import annotations

import json
import shlex

import pytest

from registry_db.errors import UsageError
from registry_db.resolve.engines import ENGINES, engine_settings, minus_one_text
from registry_db.resolve.plan import Resolution
from registry_db.resolve.rates import complete


def resolution(al: float, k: int = 5, rates: tuple[float, ...] | None = None) -> Resolution:
    """What the resolver answers for a stored profile: its AL, and its rates or derived ones."""
    _, rate, per_position, derived = complete(k, acceptance_length=al, acceptance_rate=None,
                                              per_position_rates=rates)
    return Resolution(al, rate, k, per_position, derived, "registry", "s", "p", None)


DERIVED = resolution(4.07)
STORED = resolution(2.78, k=3, rates=(0.9, 0.6, 0.28))


def text(r: Resolution, engine: str, shell: bool = False) -> str:
    return "\n".join(engine_settings(r, engine).lines(shell))


def test_the_table_has_one_row_per_engine():
    assert list(ENGINES) == ["vllm", "sglang", "trtllm", "atom", "tilert"]


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
])
def test_each_engine_for_derived_and_stored_rates(engine, derived, stored):
    assert DERIVED.rates_derived and not STORED.rates_derived
    assert text(DERIVED, engine) == derived
    assert text(STORED, engine) == stored


@pytest.mark.parametrize("al, k, shown, minus_one", [
    (2.78, 3, "2.78", "1.78"),   # float arithmetic would say 1.7799999999999998
    (3.51, 5, "3.51", "2.51"),   # ... and 2.5099999999999998
    (1.0, 4, "1.0", "0.0"),      # nothing accepted
    (6.0, 5, "6.0", "5.0"),      # K + 1: every draft accepted
])
def test_numbers_are_the_shortest_decimal_and_al_minus_1_is_decimal(al, k, shown, minus_one):
    r = resolution(al, k)
    assert text(r, "sglang").splitlines()[0] == f"SGLANG_SIMULATE_ACC_LEN={shown}"
    assert text(r, "trtllm") == f"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS={minus_one}"
    assert text(r, "atom") == f"--spec-decode-acceptance-length {shown}"
    config = json.loads(text(r, "vllm"))
    assert config["synthetic_acceptance_length"] == al and config["num_speculative_tokens"] == k


def test_al_minus_1_never_shows_an_exponent():
    assert minus_one_text(1.0000000000000002) == "0.0000000000000002"


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
        "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}}
    assert engine_settings(STORED, "trtllm").to_json() == {
        "engine": "trtllm", "env": {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "1.78"}}
    assert engine_settings(DERIVED, "vllm").to_json() == {"engine": "vllm", "speculative_config": {
        "num_speculative_tokens": 5, "rejection_sample_method": "synthetic",
        "synthetic_acceptance_length": 4.07}}
    assert engine_settings(DERIVED, "atom").to_json() == {
        "engine": "atom", "args": ["--spec-decode-acceptance-length", "4.07"]}


def test_shell_form_exports_and_quotes():
    assert text(DERIVED, "tilert", shell=True) == (
        "export TILERT_SIMULATE_ACC_LEN=4.07\n"
        "export TILERT_SIMULATE_ACC_METHOD=match-expected")
    vllm = text(DERIVED, "vllm", shell=True)
    assert vllm.startswith("'{") and shlex.split(vllm) == [text(DERIVED, "vllm")]
    assert text(DERIVED, "atom", shell=True) == "--spec-decode-acceptance-length 4.07"


def test_shell_quoting_of_a_value_that_needs_it(monkeypatch):
    """A value with shell syntax in it is quoted, so `eval` sets it and runs nothing."""
    from registry_db.resolve import engines

    monkeypatch.setitem(engines.ENGINES, "odd", engines.EngineRow(
        "env", (("ODD_METHOD", "a b; rm -rf x"), ("ODD_LEN", engines.AL))))
    assert text(DERIVED, "odd", shell=True) == (
        "export ODD_METHOD='a b; rm -rf x'\nexport ODD_LEN=4.07")


def test_unknown_engine_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown engine 'hf'; one of vllm, sglang"):
        engine_settings(DERIVED, "hf")
