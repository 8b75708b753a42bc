"""``resolve --batch --emit ENGINE`` (issue 25): each answer carries ``"emit"``, the knobs
``--emit`` prints for that run, by name; and everything ``--emit --shell`` writes for a shell
is quoted or refused, a deployment's pool names included (issue 27.2)."""

from __future__ import annotations

import json
import subprocess

import pytest

from registry_db.resolve.engines import ENGINES
from tests.helpers import build_seed, run_cli

KEY = {"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off",
       "category": "coding"}
FLAGS = ["--model", "deepseek-v4.1-flash", "--method", "dspark", "--k", "5", "--thinking",
         "off", "--category", "coding"]
POOL = {"name": "decode", "engine": {"speculative": {"method": "dspark", "num_spec_tokens": 5}}}


@pytest.fixture
def url(shared_url):
    """A registry holding the seed, shared by the tests that only read it."""
    return shared_url("seed", build_seed)


def _knobs(settings: dict) -> dict[str, str]:
    """``--emit --json``'s settings as the batch's text knobs: vLLM's values each as its JSON
    text (docs/resolving.md), so that ``json.loads`` reads every one back."""
    if "env" in settings:
        return dict(settings["env"])
    if "speculative_config" in settings:
        return {k: json.dumps(v) for k, v in settings["speculative_config"].items()}
    args = settings["args"]
    return dict(zip(args[::2], args[1::2]))


@pytest.mark.parametrize("engine_name", list(ENGINES))
def test_each_answer_carries_the_knobs_emit_prints_for_its_run(url, engine_name):
    lines = [{"id": 1, **KEY},
             {"id": 2, **KEY, "cli": {"num_spec_tokens": 5, "acceptance_length": 2.78}},
             {"id": 3, **KEY, "k": 7},
             {"id": 4, **{k: v for k, v in KEY.items() if k not in ("method", "k")},
              "deployment": {"pools": [{"name": "prefill"}, POOL]}}]
    result = run_cli("-d", url, "resolve", "--batch", "-", "--emit", engine_name,
                     input="".join(json.dumps(ln) + "\n" for ln in lines))
    assert result.exit_code == 0, result.stderr
    answers = [json.loads(ln) for ln in result.stdout.splitlines()]
    plain = [json.loads(ln) for ln in run_cli(
        "-d", url, "resolve", "--batch", "-",
        input="".join(json.dumps(ln) + "\n" for ln in lines)).stdout.splitlines()]
    # The answer is unchanged, "emit" added last.
    assert [{k: v for k, v in a.items() if k != "emit"} for a in answers] == plain
    assert list(answers[0])[-1] == "emit"
    one = json.loads(run_cli("-d", url, "resolve", *FLAGS, "--emit", engine_name,
                             "--json").stdout)
    assert answers[0]["emit"] == _knobs(one)
    stated = json.loads(run_cli("-d", url, "resolve", *FLAGS, "--acceptance-length", "2.78",
                                "--emit", engine_name, "--json").stdout)
    assert answers[1]["emit"] == _knobs(stated)
    assert "emit" not in answers[2] and answers[2]["refused"]["reason"] == "no_match"
    assert answers[3]["emit"] == {"decode": _knobs(one)}


def test_batch_emit_text_is_the_encoders(url):
    result = run_cli("-d", url, "resolve", "--batch", "-", "--emit", "vllm",
                     input=json.dumps(KEY) + "\n")
    line = result.stdout.rstrip("\n")
    assert line == json.dumps(json.loads(line), ensure_ascii=False)


@pytest.mark.parametrize("name", ["a$(touch PWNED)b", "it's \"quoted\"", "`touch PWNED`",
                                  "x; touch PWNED"])
def test_shell_output_with_a_hostile_pool_name_runs_nothing(url, tmp_path, name):
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(json.dumps({"pools": [{**POOL, "name": name}]}))
    model = ["--model", KEY["model"], "--thinking", "off", "--category", "coding"]
    result = run_cli("-d", url, "resolve", *model, "--deployment", str(deploy), "--emit",
                     "sglang", "--shell")
    assert result.exit_code == 0, result.stderr
    script = 'eval "$(cat)"; printf %s "$SGLANG_SIMULATE_ACC_LEN"'
    done = subprocess.run(["bash", "-c", script], input=result.stdout, capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "4.07", "")
    assert not (tmp_path / "PWNED").exists()
    assert result.stdout.splitlines()[0].startswith("# pool ")


@pytest.mark.parametrize("name", ["a\ntouch PWNED", "a\rb", "a\x1b[31mb"])
def test_a_pool_name_with_control_characters_is_refused_where_it_enters(url, tmp_path, name):
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(json.dumps({"pools": [{**POOL, "name": name}]}))
    model = ["--model", KEY["model"], "--thinking", "off", "--category", "coding"]
    result = run_cli("-d", url, "resolve", *model, "--deployment", str(deploy), "--emit",
                     "sglang", "--shell")
    # No settings: only the text whose eval fails (test_resolve_shell.py).
    assert result.exit_code == 1 and result.stdout.splitlines()[-1] == "false"
    assert "touch" not in result.stdout and "control character" in result.stderr


def test_every_vllm_value_is_json_text(url):
    """docs/resolving.md: vLLM's values as JSON text; "synthetic" came out bare, which
    json.loads refuses."""
    result = run_cli("-d", url, "resolve", "--batch", "-", "--emit", "vllm",
                     input=json.dumps(KEY) + "\n")
    emit = json.loads(result.stdout)["emit"]
    assert {k: json.loads(v) for k, v in emit.items()} == {
        "num_speculative_tokens": 5, "rejection_sample_method": "synthetic",
        "synthetic_acceptance_length": 4.07}


INEXACT = """kind: AcceptanceProfileSet
name: inexact
profiles:
  - model: model-a
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "on"
    category: coding
    acceptance_length: 3.0
    per_position_rates: [0.9, 0.6, 0.491]
    method: measured
    provenance:
      source: https://example.org/run.yaml
      hardware: b300
      engine_image: img:1
      sampling: {temperature: 0.0}
"""


def test_a_line_whose_hand_off_is_inexact_is_refused_unless_asked_for(engine, db_url, tmp_path):
    from registry_db.importing.write import import_paths

    (tmp_path / "inexact.yaml").write_text(INEXACT)
    import_paths(engine, [tmp_path / "inexact.yaml"])
    line = json.dumps({"id": "a", "model": "model-a", "method": "mtp", "k": 3, "thinking": "on",
                       "category": "coding"}) + "\n"
    result = run_cli("-d", db_url, "resolve", "--batch", "-", "--emit", "vllm", input=line)
    assert result.exit_code == 0    # a refusal is an answer
    assert json.loads(result.stdout) == {"id": "a", "refused": {
        "reason": "inexact_handoff",
        "message": "vLLM would realise AL 2.991 (1 + the sum of synthetic_acceptance_rates "
                   "[0.9, 0.6, 0.491]), not the resolved AL 3; --allow-inexact hands it over "
                   "anyway"}}
    # SGLang takes the length: realised exactly, no refusal.
    assert "emit" in json.loads(run_cli("-d", db_url, "resolve", "--batch", "-", "--emit",
                                        "sglang", input=line).stdout)
    allowed = run_cli("-d", db_url, "resolve", "--batch", "-", "--emit", "vllm",
                      "--allow-inexact", input=line)
    assert json.loads(json.loads(allowed.stdout)["emit"]["synthetic_acceptance_rates"]) == [
        0.9, 0.6, 0.491]
    assert allowed.stderr.startswith("warning: vLLM would realise AL 2.991")
