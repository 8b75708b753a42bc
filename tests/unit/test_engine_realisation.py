"""Every engine realises the resolved AL, or the hand-off is refused: for each (AL, K) of a grid
(K 1..8; AL at the bounds, the whole numbers and values with 6 decimals in [1, K + 1]; rates
derived, stored exactly, and stored 0.005 off), the text ``--emit`` prints is read with each
engine's own parsing rule, written here as the engine's code does it, and the AL the engine then
realises must be the resolved one within 1e-9 (:data:`registry_db.resolve.engines.EXACT`), or
``engine_settings`` refused (``inexact_handoff``), and only then.

The rules, and the code they follow:

- vLLM, vllm-project/vllm 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443, vllm/config/speculative.py:
  ``--speculative-config`` is ``json.loads``; ``_resolve_synthetic_acceptance_rates`` takes the
  rates as given (length K, each in [0, 1], non-increasing) or the length in [1, K + 1] through
  ``_acceptance_length_to_rates`` (the minimum-variance schedule); the rates are unconditional,
  so the mean accepted length is 1 + their sum (``synthetic_acceptance_rates``' docstring).
- SGLang, sgl-project/sglang 0003215cf1464f44b389cd0b18d0b4c56f2a3da6,
  python/sglang/srt/environ.py: ``SGLANG_SIMULATE_ACC_LEN = EnvFloat(-1)``, ``float(value)``,
  and an unparsable value falls back to -1 (simulation off); 2dd501d149552ea85135d4eeb7dd740c5e
  691091, python/sglang/srt/speculative/spec_utils.py, ``generate_simulated_accept_index``:
  ``match-expected`` clamps to [1, spec_steps + 1] and draws ``lower`` or ``upper`` with
  weight ``simulate_acc_len - lower`` on ``upper``.
- TensorRT-LLM, NVIDIA/TensorRT-LLM 00b6d5a25c30b4382d24fbdf52956d601b3ffd24,
  tensorrt_llm/_torch/speculative/interface.py: ``get_force_num_accepted_tokens_float`` is
  ``float(...)`` (0.0 when unset or invalid), ``get_force_num_accepted_tokens`` is ``int(...)``
  (0 when invalid); 7ed07f0691dff2c1c89196adee670ce9f4f15f67,
  tests/unittest/_torch/speculative/test_force_accepted_tokens.py: ``test_zero_value_is_noop``
  (0 forces nothing: the real acceptance stays), the integer part always accepted plus the
  target's token, capped at draft length + 1, the fraction the probability of one more
  (``test_fractional_capped_when_no_room``: none when there is no room).
- ATOM, ROCm/ATOM ffdf3bb5ddf8a15a64d521a2eeb3bc7438f9ac21: atom/model_engine/arg_utils.py
  (``--spec-decode-acceptance-length``, ``type=float``), atom/config.py
  (``_resolve_synthetic_acceptance``: in [1, K + 1]), atom/model_ops/rejection_sampler.py
  (``acceptance_length_to_rates``; the mean is 1 + the sum).
- TileRT: no public source reads ``TILERT_SIMULATE_ACC_LEN`` (tile-ai/TileRT
  a8368a681342d0686e76bbd2225b320f2fead8a2 has none). The rule here is the one its method name
  ``match-expected`` says, SGLang's above: an assumption, stated as one.
- BLIS / inference-sim (inference-sim/inference-sim 730fc28c8540f7e5a23a1c8d09a09c3ec46b0f50,
  cmd/root.go: ``--num-speculative-tokens`` int, ``--speculative-acceptance-rate`` float64;
  docs/guide/latency-models.md: progress ``g = 1 + α·K`` tokens per step). Go's ParseFloat
  rounds as Python's ``float`` does.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from registry_db.errors import ResolutionRefused
from registry_db.resolve.engines import ENGINES, EXACT, engine_settings
from registry_db.resolve.plan import Resolution
from registry_db.resolve.rates import complete, min_variance_rates

# --- the engines' rules --------------------------------------------------------------------

def _env(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def _flags(text: str) -> dict[str, str]:
    words = text.split(" ")
    return dict(zip(words[::2], words[1::2], strict=True))


def vllm(text: str, k: int) -> float | None:
    config = json.loads(text)
    assert config["rejection_sample_method"] == "synthetic"
    n = config["num_speculative_tokens"]
    assert n == k
    rates, length = (config.get("synthetic_acceptance_rates"),
                     config.get("synthetic_acceptance_length"))
    assert (rates is None) != (length is None), "exactly one of the rates and the length"
    if rates is not None:
        assert len(rates) == n and all(0.0 <= r <= 1.0 for r in rates)
        assert not any(rates[i] > rates[i - 1] for i in range(1, n))
        resolved = list(rates)
    else:
        assert 1.0 <= length <= float(n + 1)
        num_drafts = length - 1
        num_full = int(num_drafts)
        resolved = ([1.0] * num_full + [num_drafts - num_full]
                    + [0.0] * (n - num_full - 1))[:n]
    return 1 + sum(resolved)


def _match_expected(value: float, spec_steps: int) -> float:
    value = max(1.0, min(spec_steps + 1, value))
    lower = int(value // 1)
    upper = lower + 1 if lower < spec_steps + 1 else lower
    if lower == upper:
        return lower
    weight_upper = value - lower
    return lower * (1.0 - weight_upper) + upper * weight_upper


def _float_or(text: str, default: float) -> float:
    try:
        return float(text)
    except ValueError:
        return default


def sglang(text: str, k: int) -> float | None:
    env = _env(text)
    assert env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    value = _float_or(env["SGLANG_SIMULATE_ACC_LEN"], -1)
    return None if value <= 0 else _match_expected(value, k)


def trtllm(text: str, k: int) -> float | None:
    """The one-model path (the float reader)."""
    value = _float_or(_env(text)["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"], 0.0)
    if value == 0:
        return None
    max_total = k + 1
    base_total = min(int(value) + 1, max_total)
    frac = value - int(value)
    return base_total + frac if frac > 0 and base_total < max_total else base_total


def trtllm_two_model(text: str, k: int) -> float | None:
    """The two-model path (the int reader): a fraction is invalid there, so 0, no forcing."""
    try:
        value = int(_env(text)["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"])
    except ValueError:
        value = 0
    return None if value == 0 else min(value + 1, k + 1)


def atom(text: str, k: int) -> float | None:
    length = float(_flags(text)["--spec-decode-acceptance-length"])
    assert 1.0 <= length <= float(k + 1)
    num_accepted_drafts = length - 1
    num_full = int(num_accepted_drafts)
    rates = ([1.0] * num_full + [num_accepted_drafts - num_full]
             + [0.0] * (k - num_full - 1))[:k]
    return 1 + sum(rates)


def tilert(text: str, k: int) -> float | None:
    env = _env(text)
    assert env["TILERT_SIMULATE_ACC_METHOD"] == "match-expected"
    value = _float_or(env["TILERT_SIMULATE_ACC_LEN"], -1)
    return None if value <= 0 else _match_expected(value, k)


def blis(text: str, k: int) -> float | None:
    flags = _flags(text)
    assert int(flags["--num-speculative-tokens"]) == k
    alpha = float(flags["--speculative-acceptance-rate"])
    assert 0.0 <= alpha <= 1.0
    return 1 + alpha * k


RULES = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm, "atom": atom, "tilert": tilert,
         "blis": blis}


# --- the grid ---------------------------------------------------------------------------------

def _grid() -> list[tuple[float, int]]:
    rng = random.Random(41)
    cases = []
    for k in range(1, 9):
        values = {1.0, float(k + 1), 1.000001, k + 1 - 0.000001,
                  *(float(w) for w in range(1, k + 2))}
        values |= {round(rng.uniform(1, k + 1), 6) for _ in range(10)}
        values |= {round(1 + (k * i) / 7, 6) for i in range(1, 7)}
        cases += [(al, k) for al in sorted(values)]
    return cases


GRID = _grid()


def derived(al: float, k: int) -> Resolution:
    _, rate, rates, is_derived = complete(k, acceptance_length=al)
    return Resolution(al, rate, k, rates, is_derived, "registry", "s", "p", None)


def stored(al: float, k: int, off: float = 0.0) -> Resolution:
    """A stored profile with AL and rates; ``off`` moves the rates' sum away from AL − 1 (the
    spec allows 0.01), on the first position that has room, keeping them non-increasing."""
    rates = list(min_variance_rates(al, k))
    if off:
        i = next((i for i, r in enumerate(rates) if r + off <= (rates[i - 1] if i else 1.0)),
                 None)
        if i is None:
            i = max(i for i, r in enumerate(rates) if r - off >= (rates[i + 1] if i + 1 < k
                                                                   else 0.0))
            off = -off
        rates[i] += off
    return Resolution(al, (al - 1) / k, k, tuple(rates), False, "registry", "s", "p", None)


def test_the_grid_covers_what_it_says():
    assert {k for _, k in GRID} == set(range(1, 9))
    assert all(1 <= al <= k + 1 for al, k in GRID)
    for k in range(1, 9):
        ours = [al for al, kk in GRID if kk == k]
        assert 1.0 in ours and float(k + 1) in ours and len(ours) > k + 8
        assert any(al != int(al) and len(repr(al).split(".")[1]) == 6 for al in ours)
    assert len(GRID) >= 180


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("variant", ["derived", "stored", "stored 0.005 off"])
def test_each_engine_realises_the_resolved_al_or_refuses(engine, variant):
    rule = RULES[engine]
    refused = 0
    for al, k in GRID:
        r = {"derived": derived(al, k), "stored": stored(al, k),
             "stored 0.005 off": stored(al, k, 0.005)}[variant]
        try:
            settings = engine_settings(r, engine)
        except ResolutionRefused as refusal:
            assert refusal.reason == "inexact_handoff"
            realised = rule("\n".join(engine_settings(r, engine, allow_inexact=True).lines()),
                            k)
            # Refused only where the engine really would not realise it.
            assert realised is None or abs(realised - al) > EXACT, (al, k, realised)
            refused += 1
            continue
        realised = rule("\n".join(settings.lines()), k)
        assert realised is not None and abs(realised - al) <= EXACT, (al, k, realised)
    # What is refused, per engine and variant: TensorRT-LLM at AL 1 (once per K), vLLM for the
    # rates that are off; nothing else.
    expected = {"trtllm": 8}.get(engine, 0)
    if engine == "vllm" and variant == "stored 0.005 off":
        expected = len(GRID)
    assert refused == expected


def test_tensorrt_llm_at_al_1_is_refused_with_what_it_would_do():
    """TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0 is TensorRT-LLM's "not forcing"
    (test_zero_value_is_noop): the run would measure its real acceptance."""
    for k in range(1, 9):
        with pytest.raises(ResolutionRefused) as info:
            engine_settings(derived(1.0, k), "trtllm")
        assert info.value.reason == "inexact_handoff"
        assert "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0 as not forcing" in info.value.message
        assert "real acceptance" in info.value.message and "--allow-inexact" in info.value.message
        allowed = engine_settings(derived(1.0, k), "trtllm", allow_inexact=True)
        assert allowed.lines() == ["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0"]
        assert trtllm(allowed.lines()[0], k) is None
        assert "real acceptance" in allowed.warnings[0]


def test_stored_rates_off_the_al_say_what_vllm_would_realise():
    """The issue's profile: AL 3.0, rates [0.9, 0.6, 0.491] (within the spec's 0.01)."""
    r = Resolution(3.0, 2 / 3, 3, (0.9, 0.6, 0.491), False, "registry", "s", "p", None)
    with pytest.raises(ResolutionRefused) as info:
        engine_settings(r, "vllm")
    assert info.value.message.startswith(
        "vLLM would realise AL 2.991 (1 + the sum of synthetic_acceptance_rates "
        "[0.9, 0.6, 0.491]), not the resolved AL 3")
    assert vllm(engine_settings(r, "vllm", allow_inexact=True).lines()[0], 3) == \
        pytest.approx(2.991)
    # The engines that take the length realise 3 from the same profile.
    for engine in ("sglang", "trtllm", "atom", "tilert", "blis"):
        assert RULES[engine]("\n".join(engine_settings(r, engine).lines()), 3) == \
            pytest.approx(3.0, abs=EXACT)


def test_tensorrt_llms_two_model_path_realises_whole_values_and_is_warned_of_fractions():
    """The int reader realises every whole AL; a fractional one would force nothing there,
    which the settings' warning says (the one-model path, above, realises it)."""
    for al, k in GRID:
        if al == 1.0:
            continue
        settings = engine_settings(derived(al, k), "trtllm")
        realised = trtllm_two_model(settings.lines()[0], k)
        if al == int(al):
            assert realised == al and settings.warnings == ()
        else:
            assert realised is None and "int(...)" in settings.warnings[0]


def test_the_rules_here_are_the_engines_on_known_values():
    """The rules above on the values their own tests use."""
    assert trtllm("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=2.6", 4) == pytest.approx(3.6)
    assert trtllm("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=9.5", 2) == 3
    assert trtllm("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0", 4) is None
    assert trtllm_two_model("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=2.6", 4) is None
    assert sglang("SGLANG_SIMULATE_ACC_LEN=3.78\nSGLANG_SIMULATE_ACC_METHOD=match-expected",
                  7) == pytest.approx(3.78)
    assert sglang("SGLANG_SIMULATE_ACC_LEN=3.0\nSGLANG_SIMULATE_ACC_METHOD=match-expected",
                  3) == 3
    assert sglang("SGLANG_SIMULATE_ACC_LEN=x\nSGLANG_SIMULATE_ACC_METHOD=match-expected",
                  3) is None
    assert atom("--spec-decode-acceptance-length 3.78", 7) == pytest.approx(3.78)
    assert math.isclose(vllm('{"num_speculative_tokens": 3, "rejection_sample_method": '
                             '"synthetic", "synthetic_acceptance_rates": [0.9, 0.6, 0.491]}',
                             3), 2.991)
