"""`registry ingest` on the command line: the --json summary, and the flags the library tests do
not reach (vllm-metrics' --name, sampling, --source, --run, --model-name). No database."""

from __future__ import annotations

import json
from pathlib import Path

from registry_db.sources.profile_set import check_paths
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources"
IX = DATA / "inferencex"
VLLM = DATA / "vllm"
IMAGE = "vllm/vllm-openai:v0.22.0"
FACTS = ["--model", "example-model", "--method", "eagle3", "--k", "3", "--thinking", "off",
         "--category", "coding", "--hardware", "b300", "--engine-image", IMAGE,
         "--temperature", "0.6"]


def test_json_lists_each_set_its_file_its_profiles_and_every_warning(tmp_path):
    out = tmp_path / "acceptance"
    result = run("ingest", "inferencex", IX / "one_mode.yaml", IX / "draft_a.yaml",
                 "--engine-image", IMAGE, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # the warnings are in the document, not said twice
    got = json.loads(result.stdout)
    assert got["sets"] == [
        {"name": "one_mode", "file": str(out / "one_mode.yaml"), "profiles": 2},
        {"name": "draft_a", "file": str(out / "draft_a.yaml"), "profiles": 2}]
    assert [(w["file"], w["line"], w["code"], w["severity"]) for w in got["warnings"]] == [
        (str(IX / "one_mode.yaml"), 4, "unknown_header_line", "warning"),
        (str(IX / "one_mode.yaml"), 5, "unknown_header_item", "warning"),
        (str(IX / "one_mode.yaml"), 11, "cell_not_measured", "warning")]
    assert set(got["warnings"][0]) == {"file", "line", "column", "path", "code", "severity",
                                       "message"}
    sets, findings = check_paths([out])  # the files it names are the files written
    assert findings == [] and sorted(s.name for s in sets) == ["draft_a", "one_mode"]


def test_json_carries_the_name_not_file_warning_at_the_validators_position(tmp_path):
    out = tmp_path / "golden.yaml"
    result = run("ingest", "inferencex", IX / "draft_a.yaml", "--engine-image", IMAGE,
                 "-o", out, "--json")
    assert result.exit_code == 0, result.output
    (warning,) = json.loads(result.stdout)["warnings"]
    (validators,) = check_paths([out])[1]
    assert (warning["code"], warning["line"], warning["column"]) == (
        validators.code, validators.line, validators.column) == ("name_not_file", 2, 7)
    assert "give --name golden" in warning["message"]


def test_json_of_a_refused_input_is_the_validators_problem_object(tmp_path):
    out = tmp_path / "acceptance"
    result = run("ingest", "inferencex", IX / "bad" / "al_nan.yaml", "--engine-image", IMAGE,
                 "-o", out, "--json")
    assert result.exit_code == 1 and not out.exists()
    got = json.loads(result.stdout)
    assert got["valid"] is False
    assert [(p["line"], p["column"], p["code"]) for p in got["problems"]] == [
        (5, 8, "al_not_finite")]


def test_json_needs_an_output_other_than_stdout(tmp_path):
    result = run("ingest", "inferencex", IX / "draft_a.yaml", "--engine-image", IMAGE, "--json")
    assert result.exit_code == 2 and result.stdout == ""
    assert "give -o DIR or -o FILE.yaml" in result.stderr
    result = run("ingest", "vllm-metrics", VLLM / "after.prom", *FACTS, "--json")
    assert result.exit_code == 2 and result.stdout == ""


def test_vllm_json_names_the_set_and_the_adaptive_warning(tmp_path):
    out = tmp_path / "m.yaml"
    result = run("ingest", "vllm-metrics", VLLM / "adaptive.prom", *FACTS, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["sets"] == [{"name": "m", "file": str(out), "profiles": 1}]
    assert [w["code"] for w in got["warnings"]] == ["draft_tokens_not_k_drafts", "local_source"]


def test_an_absolute_path_as_the_source_warns_and_a_given_source_does_not(tmp_path):
    out = tmp_path / "m.yaml"
    result = run("ingest", "vllm-metrics", VLLM / "after.prom", "--before",
                 VLLM / "before.prom", *FACTS, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    (warning,) = json.loads(result.stdout)["warnings"]
    assert warning["code"] == "local_source" and warning["severity"] == "warning"
    assert str(VLLM / "after.prom") in warning["message"] and "--source" in warning["message"]
    given = run("ingest", "vllm-metrics", VLLM / "after.prom", *FACTS, "--source",
                "https://ci.example/1/after.prom", "-o", tmp_path / "n.yaml", "--json")
    assert json.loads(given.stdout)["warnings"] == []


def test_vllm_flags_reach_the_profile(tmp_path):
    out = tmp_path / "run.yaml"
    result = run("ingest", "vllm-metrics", VLLM / "after-two-models.prom",
                 "--before", VLLM / "before.prom", *FACTS, "--model-name", "example/model",
                 "--top-p", "0.95", "--top-k", "20", "--max-tokens", "4096",
                 "--source", "team benchmark", "--run", "https://ci.example/1",
                 "--name", "team-run", "-o", out)
    assert result.exit_code == 0, result.output
    assert "whose name differs; give --name run" in result.stderr
    (ps,) = check_paths([out])[0]
    assert ps.name == "team-run"
    (p,) = ps.profiles
    pv = p.provenance
    assert (pv.source, pv.run) == ("team benchmark", "https://ci.example/1")
    assert (pv.sampling.temperature, pv.sampling.top_p, pv.sampling.top_k,
            pv.sampling.max_tokens) == (0.6, 0.95, 20, 4096)
    assert dict(pv.settings)["num_drafts"] == 84995  # example/model's counters only


def test_a_set_is_named_after_its_file_made_file_safe(tmp_path):
    odd = tmp_path / "in" / "GLM 5.3 (eagle3, draft#2).yaml"
    odd.parent.mkdir()
    odd.write_text((IX / "draft_a.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out"
    result = run("ingest", "inferencex", odd, "--engine-image", IMAGE, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    (written,) = json.loads(result.stdout)["sets"]
    assert written == {"name": "GLM-5.3-eagle3-draft-2",
                       "file": str(out / "GLM-5.3-eagle3-draft-2.yaml"), "profiles": 2}
    sets, findings = check_paths([out])  # no name_not_file: the set is named as its file
    assert findings == [] and sets[0].name == "GLM-5.3-eagle3-draft-2"


# --- values the spec refuses are reported where the user wrote them -------------------------

HEADER = "# dataset: {category} | temperature: 1.0\n# Measured on m (B300, vLLM MTP).\n"


def test_a_value_beyond_the_registrys_limits_is_an_error_at_its_input_line(tmp_path):
    """K above 64, a model or category too long: the registry's own limits, reported at the
    cell (or the dataset line) of the input, not at a line of YAML that was never written."""
    files = {"big_k": HEADER.format(category="coding") + "m:\n  thinking_on:\n    100: 1.5\n",
             "long_model": HEADER.format(category="coding") + "m" * 201 + ":\n"
                           "  thinking_on:\n    1: 1.5\n",
             "long_category": HEADER.format(category="c" * 65) + "m:\n  thinking_on:\n"
                              "    1: 1.5\n"}
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    result = run("ingest", "inferencex", *(tmp_path / f"{n}.yaml" for n in files),
                 "--engine-image", IMAGE, "-o", tmp_path / "out", "--json")
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    errors = [p for p in json.loads(result.stdout)["problems"] if p["severity"] == "error"]
    assert [(Path(p["file"]).stem, p["line"], p["column"], p["path"], p["code"])
            for p in errors] == [
        ("big_k", 5, 10, "num_spec_tokens", "bad_k"),
        ("long_category", 1, 12, "category", "too_long"),  # at the value itself
        ("long_model", 5, 8, "model", "too_long")]


def test_a_bad_set_name_or_flag_value_is_a_usage_error_naming_the_flag(tmp_path):
    result = run("ingest", "inferencex", IX / "draft_a.yaml", "--name", ".hidden",
                 "--engine-image", IMAGE, "-o", tmp_path)
    assert result.exit_code == 2 and list(tmp_path.iterdir()) == []
    assert result.stderr == ("Error: --name '.hidden' cannot name a set: it starts with '.', "
                             "which makes a hidden file\n")
    flags = [*FACTS[:1], "m" * 201, *FACTS[2:]]
    result = run("ingest", "vllm-metrics", VLLM / "after.prom", "--before", VLLM / "before.prom",
                 *flags, "--name", ".hidden", "-o", tmp_path / "x.yaml")
    assert result.exit_code == 2 and list(tmp_path.iterdir()) == []
    assert result.stderr.startswith("Error: --name: name '.hidden' cannot be a file name")
    assert "; --model: model is 201 characters long" in result.stderr


def test_an_al_beyond_the_floats_is_refused_as_not_finite(tmp_path):
    # tests/data/sources/inferencex/bad/al_nan.yaml with an integer no float holds in its cell.
    cell = "1" + "0" * 400
    curve = tmp_path / "al_big.yaml"
    curve.write_text((IX / "bad" / "al_nan.yaml").read_text().replace(".nan", cell))
    out = tmp_path / "acceptance"
    result = run("ingest", "inferencex", curve, "--engine-image", IMAGE, "-o", out, "--json")
    assert result.exit_code == 1 and not out.exists(), result.output
    (problem,) = json.loads(result.stdout)["problems"]
    assert (problem["line"], problem["column"], problem["code"]) == (5, 8, "al_not_finite")
    assert problem["message"] == "AL 1000000000000000000000000000000000000... is not finite"
