"""The resolver's rules, one test each, on both backends: layers, refusals, fallback, conflicts,
hardware, rates, and the spec's own example resolved from the seed."""

from __future__ import annotations

import math

import pytest

from registry_db.errors import ResolutionRefused
from registry_db.model import InlineValue, Pin
from registry_db.resolve.plan import Fallback, HardwareMismatch, Request, resolve
from registry_db.resolve.rates import min_variance_rates
from registry_db.resolve.reading import reading
from tests.helpers import build_seed, build_sets

SEED_URL = ("https://github.com/SemiAnalysisAI/InferenceX/blob/main/inferencex-e2e/infx/"
            "golden_al_distribution/")


@pytest.fixture
def reg(shared_registry):
    """An engine on a registry holding :data:`SETS`, shared by the tests that only read it."""
    return shared_registry("sets", build_sets)


def run(model: str = "solo", category: str | None = "coding", *, thinking: str | None = "off",
        k: int = 3, sets: tuple[str, ...] | None = ("alpha",), **layers) -> Request:
    """A request for ``model``/eagle at K 3 (by default: alpha's solo/coding)."""
    return Request(model, "eagle", k, thinking, category, sets=sets, **layers)


def refused(engine, request: Request) -> ResolutionRefused:
    with pytest.raises(ResolutionRefused) as info:
        resolve(engine, request)
    return info.value


def value(al: float | None = None, k: int = 3, **kw) -> InlineValue:
    return InlineValue(num_spec_tokens=k, acceptance_length=al, **kw)


# --- the spec's own example, from the seed --------------------------------------------------------

@pytest.fixture
def seeded(shared_registry):
    return shared_registry("seed", build_seed)


def test_seed_deepseek_off_coding_end_to_end(seeded):
    got = resolve(seeded, Request("deepseek-v4.1-flash", "dspark", 5, "off", "coding",
                                  hardware="b300"))
    assert got.to_json() == {
        "acceptance_length": 4.07,
        "acceptance_rate": (4.07 - 1) / 5,
        "num_spec_tokens": 5,
        "per_position_rates": min_variance_rates(4.07, 5),
        "rates_derived": True,
        "layer": "registry",
        "profile_set": "inferencex-golden-al",
        "profile": "deepseek-v4.1-flash/dspark/k5/thinking-off/coding",
        "revision": 1,
        "source": SEED_URL + "dsv41flash_dspark.yaml",
        "uncertainty": None,
        "counts": None,
        "fallback": None,
        "hardware_mismatch": None,
        "warnings": [],
    }
    assert list(got.to_json()) == ["acceptance_length", "acceptance_rate", "num_spec_tokens",
                                   "per_position_rates", "rates_derived", "layer", "profile_set",
                                   "profile", "revision", "source", "uncertainty", "counts",
                                   "fallback", "hardware_mismatch", "warnings"]


def test_seed_thinking_on_and_copied_glm(seeded):
    on = resolve(seeded, Request("deepseek-v4.1-flash", "dspark", 5, "on", "coding"))
    assert on.acceptance_length == 3.51 and on.per_position_rates == (1.0, 1.0, 3.51 - 1 - 2,
                                                                      0.0, 0.0)
    glm = resolve(seeded, Request("glm-5.3", "mtp", 3, "on", "coding"))
    assert (glm.acceptance_length, glm.profile) == (2.99, "glm-5.3/mtp/k3/thinking-on/coding")
    assert glm.source == SEED_URL + "glm5.3_mtp.yaml"
    assert glm.warnings == ("the profile's value is not measured "
                            "(copied from glm-5.2-fp8/mtp/k3/thinking-on/coding)",)


def test_seed_other_chip_and_uncovered_category(seeded):
    got = resolve(seeded, Request("deepseek-v4.1-flash", "dspark", 5, "off", "chat",
                                  pin=Pin(fallback_category="coding"), hardware="h200"))
    assert got.fallback == Fallback("chat", "coding")
    assert got.hardware_mismatch == HardwareMismatch("b300", "h200")
    # The image refused K 6-8: no value, and no rescaling of K 5's.
    assert refused(seeded, Request("deepseek-v4.1-flash", "dspark", 6, "off", "coding")
                   ).reason == "no_match"


# --- layers --------------------------------------------------------------------------------------

#: Each layer's statement and the AL it gives alone: the registry's is alpha's solo/coding.
LAYERS = {
    "registry": ({}, 2.5),
    "workload": ({"workload": InlineValue(3, acceptance_length=2.1)}, 2.1),
    "scenario-value": ({"pin": Pin(value=InlineValue(3, acceptance_length=2.3))}, 2.3),
    "scenario-profiles": ({"pin": Pin(profiles="beta")}, 2.9),
    "cli": ({"cli": InlineValue(3, acceptance_length=3.5)}, 3.5),
}
ORDER = ["registry", "workload", "scenario-value", "scenario-profiles", "cli"]
PAIRS = [(lo, hi) for i, lo in enumerate(ORDER) for hi in ORDER[i + 1:]
         if {lo, hi} != {"scenario-value", "scenario-profiles"}]  # one pin can't be both


@pytest.mark.parametrize("name", ORDER)
def test_each_layer_alone(reg, name):
    stated, al = LAYERS[name]
    got = resolve(reg, run(**stated))
    assert got.layer == name.split("-")[0] and got.acceptance_length == al
    assert got.warnings == ()


@pytest.mark.parametrize("lower,higher", PAIRS)
def test_higher_layer_wins_and_layers_are_not_merged(reg, lower, higher):
    got = resolve(reg, run(**LAYERS[lower][0], **LAYERS[higher][0]))
    assert got.layer == higher.split("-")[0]
    assert got.acceptance_length == LAYERS[higher][1]
    if lower != "registry":
        assert f"the {lower.split('-')[0]} layer's acceptance is overridden by the " \
               f"{higher.split('-')[0]} layer (layers are not merged)" in got.warnings


def test_inline_answer_names_no_set_and_keeps_its_source(reg):
    got = resolve(reg, run(cli=value(2.0, source="a server log")))
    assert (got.profile_set, got.profile, got.source) == (None, None, "a server log")
    assert got.hardware_mismatch is None and got.fallback is None


def test_scenario_set_is_consulted_in_place_of_the_registry(reg):
    # solo/coding is held by alpha and beta: the registry would conflict, the pin's set does not.
    assert refused(reg, run(sets=None)).reason == "conflict"
    got = resolve(reg, run(sets=None, pin=Pin(profiles="beta")))
    assert (got.layer, got.profile_set, got.acceptance_length) == ("scenario", "beta", 2.9)


# --- refusals ------------------------------------------------------------------------------------

def test_no_thinking(reg):
    r = refused(reg, run(thinking=None))
    assert r.reason == "no_thinking" and "thinking mode" in r.message
    assert refused(reg, run(thinking=None, pin=Pin(profiles="beta"))).reason == "no_thinking"
    assert resolve(reg, run(thinking=None, cli=value(2.0))).layer == "cli"  # no lookup, no need


def test_no_category(reg):
    r = refused(reg, run(category=None))
    assert r.reason == "no_category" and "fallback_category" in r.message


def test_no_match(reg):
    r = refused(reg, run(category="poetry"))
    assert r.reason == "no_match"
    assert "solo/eagle/k3/thinking-off/poetry" in r.message


def test_fallback_no_match(reg):
    r = refused(reg, run(category="poetry", pin=Pin(fallback_category="law")))
    assert r.reason == "fallback_no_match"
    assert "'poetry' has no profile" in r.message and "thinking-off/law" in r.message
    r = refused(reg, run(category=None, pin=Pin(fallback_category="law")))
    assert r.reason == "fallback_no_match" and "states no category" in r.message


@pytest.mark.parametrize("category,sets,names", [
    ("chat", None, "alpha, beta"),
    ("coding", None, "alpha, beta, gamma"),
    ("coding", ("gamma", "beta"), "beta, gamma"),
])
def test_conflict_names_every_matching_set(reg, category, sets, names):
    r = refused(reg, run("duo", category, sets=sets))
    assert r.reason == "conflict"
    assert f"sets hold duo/eagle/k3/thinking-off/{category}: {names};" in r.message


def test_conflict_in_the_fallback(reg):
    r = refused(reg, run("duo", "poetry", sets=None, pin=Pin(fallback_category="coding")))
    assert r.reason == "conflict" and "alpha, beta, gamma" in r.message


@pytest.mark.parametrize("name,al", [("alpha", 2.6), ("beta", 2.7), ("gamma", 2.8)])
def test_no_conflict_when_the_caller_names_one_set(reg, name, al):
    got = resolve(reg, run("duo", "coding", sets=(name,)))
    assert (got.profile_set, got.acceptance_length) == (name, al)


def test_unknown_set_named_by_the_scenario_is_refused_not_replaced(reg):
    # alpha alone would answer solo/coding; the scenario's unknown set must not fall to it.
    r = refused(reg, run(pin=Pin(profiles="alpah")))
    assert r.reason == "unknown_set"
    assert "'alpah'" in r.message and "did you mean 'alpha'" in r.message
    assert "the registry is not consulted in its place" in r.message


def test_unknown_set_in_sets_is_refused_even_when_a_higher_layer_wins(reg):
    for request in (run(sets=("alpha", "nope")), run(sets=("nope",), cli=value(2.0))):
        r = refused(reg, request)
        assert r.reason == "unknown_set" and "'nope'" in r.message


@pytest.mark.parametrize("layer,stated", [
    ("workload", {"workload": value(2.0, k=4)}),
    ("scenario", {"pin": Pin(value=value(2.0, k=2))}),
    ("cli", {"cli": value(2.0, k=5)}),
])
def test_k_mismatch_at_every_layer(reg, layer, stated):
    r = refused(reg, run(**stated))
    assert r.reason == "k_mismatch" and f"the {layer} layer's value" in r.message


@pytest.mark.parametrize("stated", [
    {"workload": value(2.0, k=4), "cli": value(2.0)},
    {"pin": Pin(value=value(2.0, k=4)), "cli": value(2.0)},
])
def test_k_mismatch_in_a_layer_that_does_not_win(reg, stated):
    assert refused(reg, run(**stated)).reason == "k_mismatch"


@pytest.mark.parametrize("stated,needle", [
    ({"workload": value(9.0)}, "workload layer's value is invalid: acceptance.acceptance_length"),
    ({"cli": value(2.0, acceptance_rate=0.5)}, "both acceptance_length and acceptance_rate"),
    ({"cli": value(None, acceptance_rate=1.5)}, "cli.acceptance_rate"),
    ({"cli": value(None)}, "states no acceptance"),
    ({"cli": value(2.0, per_position_rates=(0.5, 0.9, 0.0))}, "rates never rise"),
    ({"pin": Pin(profiles="beta", value=value(2.0))}, "pin.profiles"),
    ({"pin": Pin(value=value(2.0), fallback_category="coding")}, "pin.fallback_category"),
    ({"pin": Pin(fallback_category="Coding!")}, "malformed"),
    ({"pin": Pin()}, "the pin sets nothing"),
    # A stated value that is invalid refuses the run even where a higher layer wins.
    ({"workload": value(0.5), "cli": value(2.0)}, "workload layer's value is invalid"),
])
def test_invalid_value(reg, stated, needle):
    r = refused(reg, run(**stated))
    assert r.reason == "invalid_value"
    assert needle in r.message


def test_invalid_value_is_checked_before_k(reg):
    r = refused(reg, run(workload=value(2.0, k=4), cli=value(9.0)))
    assert r.reason == "invalid_value"


@pytest.mark.parametrize("request_,needle", [
    (Request("solo", "eagle", 0, "off", "coding"), "k must be an integer of at least 1"),
    (Request("solo", "eagle", True, "off", "coding"), "k must be an integer"),
    (Request("solo", "", 3, "off", "coding"), "method must be a non-empty string"),
    (Request("solo", "eagle", 3, "maybe", "coding"), "thinking must be 'on' or 'off'"),
    (Request("solo", "eagle", 3, "off", "Coding"), "category 'Coding' is malformed"),
    (Request("solo", "eagle", 3, "off", "coding", sets=()), "sets must be a non-empty list"),
])
def test_invalid_request(reg, request_, needle):
    r = refused(reg, request_)
    assert r.reason == "invalid_request" and needle in r.message


# --- fallback ------------------------------------------------------------------------------------

def test_fallback_replaces_a_category_without_a_curve(reg):
    got = resolve(reg, run(category="poetry", pin=Pin(fallback_category="coding")))
    assert got.fallback == Fallback("poetry", "coding")
    assert got.to_json()["fallback"] == {"replaced": "poetry", "category": "coding"}
    assert got.profile == "solo/eagle/k3/thinking-off/coding" and got.acceptance_length == 2.5
    assert "the workload's category 'poetry' has no profile; used the fallback category " \
           "'coding'" in got.warnings


def test_fallback_stands_in_for_a_missing_category(reg):
    got = resolve(reg, run(category=None, pin=Pin(fallback_category="chat")))
    assert got.fallback == Fallback(None, "chat") and got.acceptance_length == 2.2


def test_fallback_is_not_used_when_the_category_has_a_curve(reg):
    got = resolve(reg, run(category="chat", pin=Pin(fallback_category="coding")))
    assert got.fallback is None and got.profile.endswith("/chat")


def test_fallback_inside_the_scenario_set(reg):
    got = resolve(reg, run(category="poetry", pin=Pin(profiles="beta",
                                                      fallback_category="math")))
    assert (got.layer, got.profile_set, got.acceptance_length) == ("scenario", "beta", 2.05)
    assert got.fallback == Fallback("poetry", "math")


def test_fallback_stays_within_the_named_sets(reg):
    # math is beta's alone; with the registry limited to alpha, the fallback has no profile.
    r = refused(reg, run(category="poetry", pin=Pin(fallback_category="math")))
    assert r.reason == "fallback_no_match" and "'alpha'" in r.message


# --- hardware ------------------------------------------------------------------------------------

@pytest.mark.parametrize("model,k,hardware,expected", [
    ("solo", 3, None, None),
    ("solo", 3, "b300", None),
    ("solo", 3, "B300", None),  # chip names compare without case
    ("solo", 3, "h100", HardwareMismatch("b300", "h100")),
    ("lit", 2, "h100", None),   # the profile names no hardware
])
def test_hardware_mismatch_recorded_or_not(reg, model, k, hardware, expected):
    got = resolve(reg, Request(model, "eagle", k, "off", "coding", hardware=hardware,
                               sets=("alpha",)))
    assert got.hardware_mismatch == expected
    assert any("measured on b300" in w for w in got.warnings) == (expected is not None)


def test_inline_values_record_no_hardware(reg):
    assert resolve(reg, run(cli=value(2.0), hardware="h100")).hardware_mismatch is None


# --- rates ---------------------------------------------------------------------------------------

def test_stored_rates_are_reported_as_stored(reg):
    got = resolve(reg, run(category="chat"))
    assert got.per_position_rates == (0.9, 0.3, 0.0) and not got.rates_derived
    assert got.acceptance_length == 2.2 and got.acceptance_rate == (2.2 - 1) / 3


def test_missing_rates_are_derived_by_the_minimum_variance_schedule(reg):
    got = resolve(reg, run())
    assert got.rates_derived and got.per_position_rates == tuple(min_variance_rates(2.5, 3))


def test_inline_rate_states_al(reg):
    got = resolve(reg, run(cli=InlineValue(3, acceptance_rate=0.45)))
    assert got.acceptance_rate == 0.45 and got.acceptance_length == 1 + 0.45 * 3
    assert got.rates_derived and got.per_position_rates == tuple(
        min_variance_rates(1 + 0.45 * 3, 3))


def test_inline_rates_alone_state_al(reg):
    got = resolve(reg, run(workload=InlineValue(3, per_position_rates=(0.9, 0.7, 0.6))))
    assert got.acceptance_length == 1 + math.fsum((0.9, 0.7, 0.6))
    assert got.acceptance_rate == (got.acceptance_length - 1) / 3
    assert got.per_position_rates == (0.9, 0.7, 0.6) and not got.rates_derived


def test_inline_al_and_rates_are_both_kept(reg):
    got = resolve(reg, run(pin=Pin(value=InlineValue(3, acceptance_length=2.205,
                                                      per_position_rates=(0.9, 0.3, 0.0)))))
    assert got.acceptance_length == 2.205 and got.per_position_rates == (0.9, 0.3, 0.0)
    assert not got.rates_derived


# --- binds ---------------------------------------------------------------------------------------

def test_resolve_reads_inside_the_callers_connection(reg):
    with reg.connect() as conn:
        got = resolve(conn, run())
        assert got.acceptance_length == 2.5
        assert not conn.closed


def test_mappings_are_checked_like_dataclasses(reg):
    got = resolve(reg, run(cli={"num_spec_tokens": 3, "acceptance_length": 2.0}))
    assert got.layer == "cli" and got.acceptance_length == 2.0
    r = refused(reg, run(cli={"num_spec_tokens": 3, "acceptance_lenght": 2.0}))
    assert r.reason == "invalid_value" and "did you mean 'acceptance_length'" in r.message


def test_unhashable_terms_are_invalid_requests_not_crashes(reg):
    for request in (Request("solo", "eagle", 3, ["off"], "coding"),
                    Request("solo", "eagle", 3, "off", ["coding"]),
                    Request("solo", "eagle", 3, "off", "coding", sets=[["alpha"]])):
        assert refused(reg, request).reason == "invalid_request"
    # A list of set names is as good as a tuple.
    assert resolve(reg, Request("solo", "eagle", 3, "off", "coding", sets=["alpha"])
                   ).profile_set == "alpha"


def test_pin_given_as_the_specs_mapping_names_its_set(seeded):
    """A library caller may pass the pin as the spec's mapping; its named set is looked up."""
    req = Request("deepseek-v4.1-flash", "dspark", 5, thinking="off", category="coding",
                  pin={"profiles": "inferencex-golden-al"})
    answer = resolve(seeded, req)
    assert (answer.layer, answer.profile_set, answer.acceptance_length) == (
        "scenario", "inferencex-golden-al", 4.07)
    missing = Request("deepseek-v4.1-flash", "dspark", 5, thinking="off", category="coding",
                      pin={"profiles": "inferencex-golden"})
    assert refused(seeded, missing).reason == "unknown_set"


def test_an_unknown_set_the_statement_refuses_names_the_nearest(shared_url):
    with reading(shared_url("sets", build_sets)) as bind:
        r = refused(bind, run(sets=("alpah",)))
    assert r.reason == "unknown_set" and "--set: no profile set named 'alpah'" in r.message
    assert "did you mean 'alpha'" in r.message
