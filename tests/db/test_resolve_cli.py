"""``registry resolve`` on both backends: exact output, files, refusals, usage errors, --batch."""

from __future__ import annotations

import json

import pytest

from tests.helpers import DATA, DSV, GLM, SOURCE, build_seed, seed_answer
from tests.helpers import run_resolve as run

FILES = DATA / "resolve"


@pytest.fixture
def url(shared_url):
    """A registry holding the seed, shared by the tests that only read it."""
    return shared_url("seed", build_seed)


# --- one run -------------------------------------------------------------------------------------

def test_readme_main_job_text(url):
    """The README's quick start, flag for flag: the seed's value on another chip."""
    result = run(url, *DSV, "--thinking", "off", "--category", "coding", "--hardware", "h200")
    assert result.exit_code == 0, result.stderr
    # The text is for reading: numbers rounded (--json keeps 0.6140000000000001).
    assert result.stdout == (
        "AL       4.07\n"
        "rate     0.614\n"
        "K        5\n"
        "rates    1.0, 1.0, 1.0, 0.07, 0.0  (derived: minimum-variance schedule)\n"
        "layer    registry\n"
        "set      inferencex-golden-al\n"
        "profile  deepseek-v4.1-flash/dspark/k5/thinking-off/coding\n"
        "revision 1\n"
        f"source   {SOURCE}\n"
        "note     the profile was measured on b300 and the run is on h200; acceptance is "
        "reused across hardware\n")
    assert result.stderr == ""


def test_json_is_the_contracts_object(url):
    result = run(url, *DSV, "--thinking", "off", "--category", "coding", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == seed_answer()
    assert list(json.loads(result.stdout)) == list(seed_answer())


def test_fallback_and_hardware_in_json_and_text(url):
    args = [*DSV, "--thinking", "off", "--category", "chat", "--fallback-category", "coding",
            "--hardware", "h100"]
    got = json.loads(run(url, *args, "--json").stdout)
    assert got["fallback"] == {"replaced": "chat", "category": "coding"}
    assert got["hardware_mismatch"] == {"measured_on": "b300", "run_on": "h100"}
    text = run(url, *args).stdout
    assert "note     the workload's category 'chat' has no profile; used the fallback " \
           "category 'coding'\n" in text
    assert "note     the profile was measured on b300 and the run is on h100" in text


def test_cli_values_win_and_keep_what_was_stated(url):
    got = json.loads(run(url, *GLM, "--category", "coding", "--acceptance-rate", "0.5",
                         "--json").stdout)
    assert (got["layer"], got["acceptance_rate"], got["acceptance_length"]) == ("cli", 0.5, 2.5)
    assert got["profile_set"] is None and got["rates_derived"]
    got = json.loads(run(url, *GLM, "--per-position-rates", "0.9,0.5,0.25", "--json").stdout)
    assert got["per_position_rates"] == [0.9, 0.5, 0.25] and not got["rates_derived"]
    assert got["acceptance_length"] == 2.65


@pytest.mark.parametrize("args,reason,needle", [
    (["--category", "coding", "--acceptance-length", "2", "--acceptance-rate", "0.5"],
     "invalid_value", "both acceptance_length and acceptance_rate"),
    (["--category", "coding", "--acceptance-length", "9"], "invalid_value", "outside [1, 4]"),
    (["--category", "chat"], "no_match", "glm-5.3/mtp/k3/thinking-on/chat"),
    (["--category", "chat", "--fallback-category", "math"], "fallback_no_match", "math"),
    (["--category", "coding", "--set", "inferencex"], "unknown_set",
     "did you mean 'inferencex-golden-al'"),
    (["--category", "coding", "--profiles", "nope"], "unknown_set", "not consulted"),
])
def test_refusals_exit_1_with_the_reason(url, args, reason, needle):
    result = run(url, *GLM, *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"refused ({reason}): ") and needle in result.stderr
    as_json = run(url, *GLM, *args, "--json")
    assert as_json.exit_code == 1
    refused = json.loads(as_json.stdout)["refused"]
    assert refused["reason"] == reason and needle in refused["message"]


def test_no_thinking_and_no_category(url):
    assert json.loads(run(url, *DSV, "--category", "coding", "--json").stdout)[
        "refused"]["reason"] == "no_thinking"
    assert json.loads(run(url, *DSV, "--thinking", "off", "--json").stdout)[
        "refused"]["reason"] == "no_category"


@pytest.mark.parametrize("args,needle", [
    (["--workload", str(FILES / "workload-coding-off.yaml"), "--thinking", "off"],
     "--workload states the thinking already"),
    (["--workload", str(FILES / "workload-coding-off.yaml"), "--category", "coding"],
     "--workload states the category already"),
    (["--scenario", str(FILES / "scenario-value.yaml"), "--profiles", "x"],
     "--scenario states the profiles already"),
    (["--scenario", str(FILES / "scenario-value.yaml"), "--fallback-category", "x"],
     "--scenario states the fallback-category already"),
    # A file that states no thinking is not said to state it.
    (["--workload", str(FILES / "workload-typo.yaml"), "--category", "coding"],
     f"--workload {FILES / 'workload-typo.yaml'} states no category, but a run takes each "
     "term from one place: state it in the file, or drop --workload to give --category"),
    (["--per-position-rates", "0.9,x,0.1"], "not a comma-separated list of numbers"),
    (["--category", "Coding!"], "malformed"),
    (["--batch", "-"], "--batch reads every run from its file; drop --model"),
])
def test_usage_errors_exit_2(url, args, needle):
    result = run(url, *DSV, *args)
    assert result.exit_code == 2 and needle in result.stderr


@pytest.mark.parametrize("args,needle", [
    (["--method", "m", "--k", "3"], "--model is required"),
    (["--model", "m", "--method", "m", "--k", "0"], "0 is not in the range x>=1"),
    (["--model", "m", "--method", "m", "--k", "3", "--thinking", "maybe"], "'maybe' is not one"),
])
def test_run_flags_are_checked_by_click(url, args, needle):
    result = run(url, *args)
    assert result.exit_code == 2 and needle in result.stderr


def test_help_ends_with_an_example(url):
    result = run(url, "--help")
    assert result.exit_code == 0 and "Example:" in result.stdout
    assert "registry resolve --batch runs.jsonl" in result.stdout


# --- files ---------------------------------------------------------------------------------------

def test_workload_file_states_the_terms(url):
    got = json.loads(run(url, *DSV, "--workload", str(FILES / "workload-coding-off.yaml"),
                         "--json").stdout)
    assert got == seed_answer()


def test_workload_file_value_wins_over_the_registry(url):
    got = json.loads(run(url, *DSV, "--workload", str(FILES / "workload-with-value.yaml"),
                         "--json").stdout)
    assert (got["layer"], got["acceptance_length"], got["source"]) == (
        "workload", 3.25, "measured on our own traffic")


def test_workload_file_problems_say_where(url):
    bad = FILES / "workload-bad-value.yaml"
    result = run(url, *DSV, "--workload", str(bad))
    assert result.exit_code == 1
    assert f"refused (invalid_value): the workload layer's value is invalid: {bad}:5:22: " \
           "acceptance.acceptance_length: acceptance_length 7.5 lies outside [1, 6]" \
           in result.stderr
    other_k = run(url, *DSV, "--workload", str(FILES / "workload-other-k.yaml"), "--json")
    assert json.loads(other_k.stdout)["refused"]["reason"] == "k_mismatch"


def test_workload_file_invalid_input_exits_1_with_findings(url):
    for name, needle in (("workload-broken.yaml", "YAML syntax error"),
                         ("workload-bad-thinking.yaml", "thinking is 'maybe'")):
        path = FILES / name
        result = run(url, *DSV, "--workload", str(path))
        assert result.exit_code == 1 and f"{path}:" in result.stderr and needle in result.stderr
    missing = run(url, *DSV, "--workload", str(FILES / "no-such-file.yaml"))
    assert missing.exit_code == 1 and "cannot read the file" in missing.stderr


def test_workload_key_near_a_known_one_warns(url):
    path = FILES / "workload-typo.yaml"
    result = run(url, *DSV, "--workload", str(path), "--json")
    assert f"{path}:2:1: categroy: warning: 'categroy' is ignored; did you mean 'category'?" \
           in result.stderr
    assert json.loads(result.stdout)["refused"]["reason"] == "no_category"


def test_scenario_file_pin(url):
    got = json.loads(run(url, *DSV, "--thinking", "off", "--category", "chat", "--scenario",
                         str(FILES / "scenario-fallback.yaml"), "--json").stdout)
    assert (got["layer"], got["profile_set"], got["fallback"]) == (
        "scenario", "inferencex-golden-al", {"replaced": "chat", "category": "coding"})
    got = json.loads(run(url, *DSV, "--scenario", str(FILES / "scenario-value.yaml"),
                         "--json").stdout)
    assert (got["layer"], got["acceptance_length"]) == ("scenario", 2.8)
    # A scenario given to resolve must state its pin (issue 16): without the key, exit 1.
    without = run(url, *DSV, "--thinking", "off", "--category", "coding", "--scenario",
                  str(FILES / "scenario-without-pin.yaml"), "--json")
    assert without.exit_code == 1
    assert json.loads(without.stdout)["problems"][0]["code"] == "missing_acceptance"


def test_scenario_file_bad_pin_and_unknown_set(url):
    bad = FILES / "scenario-bad-pin.yaml"
    result = run(url, *DSV, "--scenario", str(bad))
    assert result.exit_code == 1 and "refused (invalid_value)" in result.stderr
    assert f"{bad}:2:13: acceptance.profiles: the pin sets both profiles and value" \
           in result.stderr
    unknown = run(url, *DSV, "--thinking", "off", "--category", "coding", "--scenario",
                  str(FILES / "scenario-unknown-set.yaml"), "--json")
    assert json.loads(unknown.stdout)["refused"]["reason"] == "unknown_set"


# --- batch ---------------------------------------------------------------------------------------

def _line(**fields) -> str:
    return json.dumps(fields)


def test_batch_answers_each_line_in_order(url, tmp_path):
    runs = [
        {"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off",
         "category": "coding"},
        {"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "chat",
         "pin": {"fallback_category": "coding"}, "hardware": "b300"},
        {"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "chat"},
        {"model": "glm-5.3", "method": "mtp", "k": 3, "cli": {"num_spec_tokens": 3,
                                                               "acceptance_rate": 0.25}},
        {"model": "glm-5.3", "method": "mtp", "k": 3, "acceptance": {"num_spec_tokens": 4,
                                                                      "acceptance_length": 2}},
        {"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "coding",
         "sets": ["inferencex-golden-al"]},
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    result = run(url, "--batch", str(path))
    assert result.exit_code == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(answers) == len(runs)
    assert answers[0] == seed_answer()
    assert answers[1]["fallback"] == {"replaced": "chat", "category": "coding"}
    assert answers[2]["refused"]["reason"] == "no_match"
    assert answers[3]["layer"] == "cli" and answers[3]["acceptance_length"] == 1.75
    assert answers[4]["refused"]["reason"] == "k_mismatch"
    assert answers[5]["profile"] == "glm-5.3/mtp/k3/thinking-on/coding"
    # Each answer is what the single command prints for the same run.
    single = run(url, *GLM, "--category", "chat", "--fallback-category", "coding",
                 "--hardware", "b300", "--json")
    assert json.loads(single.stdout) == answers[1]


def test_batch_from_stdin_with_bad_lines_exits_1_and_answers_the_rest(url):
    lines = [
        _line(model="glm-5.3", method="mtp", k=3, thinking="on", category="coding"),
        "{not json",
        _line(model="glm-5.3", method="mtp"),
        _line(model="glm-5.3", method="mtp", k="3"),
        _line(model="glm-5.3", method="mtp", k=3, categroy="coding"),
        '{"model": "a", "model": "b", "method": "mtp", "k": 3}',
        "",
        _line(model="glm-5.3", method="mtp", k=3, thinking="sometimes"),
        _line(model="glm-5.3", method="mtp", k=3, cli={"num_spec_tokens": 3,
                                                       "acceptance_rate": 2}),
        "[1, 2]",
    ]
    result = run(url, "--batch", "-", input="\n".join(lines) + "\n")
    assert result.exit_code == 1
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(answers) == len(lines) - 1  # the blank line 7 is skipped (issue 16)
    assert answers[0]["acceptance_length"] == 2.99
    reasons = [a["refused"]["reason"] for a in answers[1:]]
    assert reasons == ["invalid_request"] * 6 + ["invalid_value", "invalid_request"]
    messages = [a["refused"]["message"] for a in answers[1:]]
    assert messages[0].startswith("line 2: not a JSON object")
    assert messages[1] == "line 3: k is required (integer)"
    assert messages[2] == "line 4: k must be an integer, got a string"
    assert "line 5: unknown key 'categroy'; did you mean 'category'?" == messages[3]
    assert "the key 'model' appears twice" in messages[4]
    # Refused by a term's rule when resolved, not as it was read: still named by its line.
    assert messages[5].startswith("line 8: thinking must be 'on' or 'off'")
    assert messages[6].startswith("the cli layer's value is invalid: cli.acceptance_rate")


def test_batch_with_only_refusals_exits_0(url, tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(_line(model="glm-5.3", method="mtp", k=3, thinking="on",
                          category="chat") + "\n")
    result = run(url, "--batch", str(path), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["refused"]["reason"] == "no_match"


def test_batch_file_that_cannot_be_read(url, tmp_path):
    result = run(url, "--batch", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 1 and "cannot read the batch" in result.stderr
