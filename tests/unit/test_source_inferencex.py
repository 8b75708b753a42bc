"""InferenceX golden AL files become profile sets: every header variant and refusal; no database."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Profile, ProfileSet
from registry_db.sources.inferencex.read import load_map, read_inferencex
from registry_db.sources.ingested import rendered
from registry_db.sources.profile_set import check_paths
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources" / "inferencex"
IMAGE = "vllm/vllm-openai:v0.22.0"
GOOD = ["example_eagle3", "shared_sampling_mtp", "dspark_spaces", "one_mode", "copied_mtp",
        "draft_a", "draft_b"]


def f(name: str) -> str:
    return str(DATA / f"{name}.yaml")


def profiles(name: str, **kwargs) -> dict[tuple, Profile]:
    kwargs.setdefault("engine_image", IMAGE)
    result = read_inferencex([f(name)], **kwargs)
    (ps,) = result.sets
    return {(p.thinking, p.num_spec_tokens): p for p in ps.profiles}


def refused(*names: str, **kwargs) -> list:
    kwargs.setdefault("engine_image", IMAGE)
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([f(n) for n in names], **kwargs)
    return exc.value.findings



# --- the issue's example and each header variant ------------------------------------------------

def test_issue_example_one_profile_per_cell_with_the_headers_provenance():
    got = profiles("example_eagle3")
    assert sorted(got) == [("off", 1), ("off", 2), ("on", 1), ("on", 2)]
    assert {k: p.acceptance_length for k, p in got.items()} == {
        ("on", 1): 1.71, ("on", 2): 2.2, ("off", 1): 1.69, ("off", 2): 2.15}
    on = got[("on", 1)]
    assert (on.model, on.speculative_method, on.category, on.method) == (
        "example-model-fp8", "eagle3", "coding", "measured")
    pv = on.provenance
    assert pv.source == f("example_eagle3")
    assert pv.run == "https://github.com/OWNER/REPO/actions/runs/123456789"
    assert (pv.benchmark, pv.hardware, pv.engine_image, pv.tp) == (
        "SPEED-Bench", "b300", IMAGE, None)
    assert (pv.sampling.temperature, pv.sampling.top_p, pv.sampling.top_k,
            pv.sampling.max_tokens) == (1.0, 0.95, None, 4096)
    assert dict(pv.settings) == {"chat_template_kwargs": '{"thinking": true}',
                                 "draft_sample_method": "probabilistic",
                                 "rejection_sample_method": "block",
                                 "draft_model": "org/example-draft"}
    off = got[("off", 2)].provenance
    assert off.sampling.temperature == 0.6
    assert dict(off.settings)["chat_template_kwargs"] == '{"thinking": false}'
    assert got[("on", 2)].provenance is not got[("off", 2)].provenance


def test_sampling_shared_on_the_dataset_line_and_missing_cells_stay_missing():
    got = profiles("shared_sampling_mtp")
    assert sorted(got) == [("off", 1), ("off", 3), ("on", 1), ("on", 2), ("on", 4)]
    for p in got.values():
        s = p.provenance.sampling
        assert (s.temperature, s.top_p, s.top_k, s.max_tokens) == (1.0, 0.95, 40, 4096)
        assert p.speculative_method == "mtp" and p.provenance.tp == 4
    assert got[("on", 2)].acceptance_length == 2.41


def test_per_mode_line_with_spaces_and_one_without_a_colon():
    got = profiles("dspark_spaces")
    on, off = got[("on", 3)].provenance, got[("off", 3)].provenance
    # the mode's own temperature wins over the dataset line's; the other mode keeps the shared one
    assert (on.sampling.temperature, on.sampling.top_p, on.sampling.top_k) == (0.6, 0.95, 20)
    assert off.sampling.temperature == 1.0 and off.sampling.top_p is None
    assert dict(on.settings) == {
        "chat_template_kwargs": '{"thinking": true, "reasoning_effort": "high"}',
        "presence_penalty": 0.0, "draft_sample_method": "probabilistic"}
    assert dict(off.settings)["chat_template_kwargs"] == '{"thinking": false}'
    assert got[("on", 3)].speculative_method == "dspark"  # agrees with method=dspark
    assert got[("on", 3)].acceptance_length == 3.14   # _metadata beside the model key is ignored


def test_one_mode_and_unknown_header_lines_are_warnings_at_file_line():
    result = read_inferencex([f("one_mode")], engine_image=IMAGE)
    (ps,) = result.sets
    assert [(p.thinking, p.num_spec_tokens) for p in ps.profiles] == [("on", 1), ("on", 3)]
    warnings = {(w.line, w.code) for w in result.warnings}
    assert warnings == {(4, "unknown_header_line"), (5, "unknown_header_item"),
                        (11, "cell_not_measured")}
    assert all(w.severity == "warning" for w in result.warnings)
    line4 = next(w for w in result.warnings if w.line == 4)
    assert line4.render().startswith(f"{f('one_mode')}:4:")
    # seed: 7 on the dataset line is a setting (the collectors' later files state it too)
    assert dict(ps.profiles[0].provenance.settings) == {"seed": 7,
                                                        "draft_model": "org/thinker-eagle3"}


@pytest.mark.parametrize("words, method", [("vLLM MTP", "mtp"), ("vLLM EAGLE3", "eagle3"),
                                           ("vLLM DSpark", "dspark")])
def test_the_method_is_the_measured_on_lines_lower_cased(tmp_path, words, method):
    path = tmp_path / "c.yaml"
    path.write_text(f"# dataset: coding | temperature: 1.0\n# Measured on m (B300, {words}).\n"
                    "m:\n  thinking_on:\n    1: 1.5\n")
    (ps,) = read_inferencex([str(path)], engine_image=IMAGE).sets
    assert ps.profiles[0].speculative_method == method


def test_header_engine_image_is_used_and_a_differing_flag_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("# dataset: coding | temperature: 1.0\n# image: vllm/vllm-openai:v1\n"
                    "# Measured on m (B300, vLLM MTP).\nm:\n  thinking_on:\n    1: 1.5\n")
    (ps,) = read_inferencex([str(path)]).sets
    assert ps.profiles[0].provenance.engine_image == "vllm/vllm-openai:v1"
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([str(path)], engine_image="other:v2")
    (finding,) = exc.value.findings
    assert (finding.code, finding.line) == ("flag_disagrees", 2)
    assert "--engine-image other:v2" in finding.message
    assert "'vllm/vllm-openai:v1' (line 2)" in finding.message


def test_methods_that_disagree_within_the_header_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("# dataset: coding | temperature: 1.0\n# Measured on m (B300, vLLM MTP).\n"
                    "# key = num_speculative_tokens (EAGLE3 level); value = golden AL\n"
                    "m:\n  thinking_on:\n    1: 1.5\n")
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([str(path)], engine_image=IMAGE)
    (finding,) = exc.value.findings
    assert (finding.code, finding.line) == ("conflicting_header", 3)
    assert "'eagle3' here but 'mtp' on line 2" in finding.message


def test_source_base_makes_the_source_the_files_url():
    url = "https://github.com/OWNER/REPO/blob/main/golden_al_distribution/"
    got = profiles("example_eagle3", source_base=url)
    assert got[("on", 1)].provenance.source == url + "example_eagle3.yaml"


# --- copied and provisional ---------------------------------------------------------------------

def test_a_copied_header_makes_copied_profiles_with_source_and_rationale():
    got = profiles("copied_mtp", engine_image=None, curve_map=load_map(f("map")))
    p = got[("on", 3)]
    assert (p.method, p.acceptance_length) == ("copied", 2.99)
    assert p.model == "new-model"  # the map does not list it: it passes through
    assert p.copied_from == "base-model/mtp/k3/thinking-on/coding"  # the map applies here too
    assert p.rationale == ("Provisional: copied from base-model-fp8's curve (base_mtp.yaml); "
                           "replace with a run on new-model.")
    assert p.provenance.engine_image is None  # not required, never invented


def test_provisional_without_a_source_curve_is_refused_saying_what_to_add():
    (finding,) = refused("bad/provisional_no_source")
    assert (finding.code, finding.line) == ("copied_without_source", 2)
    assert "add a header line 'copied from FILE.yaml'" in finding.message


# --- refusals -------------------------------------------------------------------------------------

def test_engine_image_is_required_and_each_file_lacking_one_is_named():
    findings = refused("example_eagle3", "draft_a", "copied_mtp", engine_image=None)
    assert [(x.file, x.code) for x in findings] == [
        (f("draft_a"), "missing_engine_image"), (f("example_eagle3"), "missing_engine_image")]
    assert "--engine-image" in findings[0].message


@pytest.mark.parametrize("name, where, code", [
    ("bad/two_models", [(6, 1)], "not_one_model"),
    ("bad/bad_k", [(5, 5), (6, 5)], "bad_k"),
    ("bad/al_nan", [(5, 8)], "al_not_finite"),
    ("bad/al_out_of_range", [(6, 8)], "al_out_of_range"),
    ("bad/no_temperature", [(2, 1)], "no_temperature"),
])
def test_files_not_in_the_format_are_errors_at_file_line_col(name, where, code):
    findings = refused(name)
    assert [(x.line, x.column) for x in findings] == where
    assert {x.code for x in findings} == {code}
    assert findings[0].render().startswith(f"{f(name)}:{where[0][0]}:{where[0][1]}: ")


# InferenceX's curve lookup prints JSON (`python -m infx.golden_al_distribution lookup ... --json`,
# `list --json`; SemiAnalysisAI/InferenceX inferencex-e2e/infx/golden_al_distribution/README.md
# at b021c146, whose package test reads `result["curve"]`, `result["tokens"]` and list rows'
# `"curve"`); counter sources' text given here by mistake is named by the counters' forms table.
@pytest.mark.parametrize("text, says", [
    ('{"curve": "qwen3.5_mtp", "tokens": 3, "thinking": "thinking_on", "acceptance_length": 3.39}',
     "infx.golden_al_distribution lookup|list --json"),
    ('[{"curve": "glm5.3_mtp"}, {"curve": "qwen3.5_mtp"}]',
     "infx.golden_al_distribution lookup|list --json"),
    ('vllm:spec_decode_num_drafts_total{engine="0"} 12.0\n', "registry ingest vllm-metrics"),
    ("INFO 12-01 10:00:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.50\n",
     "registry ingest vllm-log"),
])
def test_another_tools_form_is_named_with_the_command_that_reads_it(tmp_path, text, says):
    path = tmp_path / "given.json"
    path.write_text(text)
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([str(path)], engine_image=IMAGE)
    (finding,) = exc.value.findings
    assert (finding.code, finding.line, finding.column) == ("another_form", 1, 1)
    assert says in finding.message


def test_a_refused_curve_is_never_judged_by_the_forms_table():
    # a real curve refused for its own fault keeps its own findings, whatever its comments say
    findings = refused("bad/two_models")
    assert {x.code for x in findings} == {"not_one_model"}


def test_nothing_is_written_when_any_file_is_refused(tmp_path):
    out = tmp_path / "out"
    result = run("ingest", "inferencex", f("example_eagle3"), f("bad/al_nan"),
                 "--engine-image", IMAGE, "-o", str(out))
    assert result.exit_code == 1
    assert f"{f('bad/al_nan')}:5:8: " in result.stderr
    assert not out.exists()


def test_two_files_that_would_make_one_set_name_are_refused(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "c.yaml").write_text((DATA / "draft_a.yaml").read_text())
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([str(tmp_path / "a" / "c.yaml"), str(tmp_path / "b" / "c.yaml")],
                        engine_image=IMAGE)
    assert [x.code for x in exc.value.findings] == ["duplicate_set_name"]


# --- sets, --name and --map -----------------------------------------------------------------------

def test_one_set_per_file_by_default():
    result = read_inferencex([f("draft_a"), f("draft_b")], engine_image=IMAGE)
    assert [ps.name for ps in result.sets] == ["draft_a", "draft_b"]


def test_merging_two_curves_of_one_key_names_both_files_and_suggests_map():
    findings = refused("draft_a", "draft_b", name="twins")
    assert {x.code for x in findings} == {"duplicate_profile_key"}
    assert all(f("draft_a") in x.message and x.file == f("draft_b") for x in findings)
    assert "--map" in findings[0].message


def test_map_renames_models_and_gives_one_curve_its_own_method():
    result = read_inferencex([f("draft_a"), f("draft_b")], name="twins", engine_image=IMAGE,
                             curve_map=load_map(f("map")))
    (ps,) = result.sets
    assert ps.name == "twins"
    assert sorted((p.model, p.speculative_method, p.num_spec_tokens) for p in ps.profiles) == [
        ("twin", "eagle3", 1), ("twin", "eagle3", 2),
        ("twin", "eagle3-gqa", 1), ("twin", "eagle3-gqa", 2)]
    # base-model-fp8 is used by copied_mtp.yaml only, so here it is an unused entry
    assert [(w.code, w.path) for w in result.warnings] == [
        ("unused_map_entry", "models.base-model-fp8")]


def test_a_map_file_with_an_unknown_section_is_refused(tmp_path):
    path = tmp_path / "map.yaml"
    path.write_text("model:\n  a: b\n")
    with pytest.raises(InvalidInput) as exc:
        load_map(str(path))
    assert [(x.code, x.line) for x in exc.value.findings] == [("unknown_key", 1)]


# --- the output ---------------------------------------------------------------------------------

def test_every_output_is_valid_by_the_registrys_validator(tmp_path):
    result = run("ingest", "inferencex", *[f(n) for n in GOOD], "--engine-image", IMAGE,
                 "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    sets, findings = check_paths([tmp_path])
    assert findings == [] and len(sets) == len(GOOD)


def test_a_set_the_validator_refuses_is_never_rendered():
    bad = ProfileSet("x", (), (Profile("m", "mtp", 1, "on", "coding", 1.5, "measured"),))
    with pytest.raises(InvalidInput) as exc:
        rendered([bad], [])
    assert {x.code for x in exc.value.findings} == {"missing_provenance"}


def test_same_input_same_bytes_with_shared_provenance_as_anchors(tmp_path):
    first = run("ingest", "inferencex", f("shared_sampling_mtp"), "--engine-image", IMAGE)
    second = run("ingest", "inferencex", f("shared_sampling_mtp"), "--engine-image", IMAGE)
    assert first.exit_code == 0 and first.stdout == second.stdout
    # two provenances (one per mode), each written once and then referred to
    assert first.stdout.count("provenance: &") == 2
    assert first.stdout.count("provenance: *") == 3


def test_several_sets_cannot_go_to_stdout():
    result = run("ingest", "inferencex", f("draft_a"), f("draft_b"), "--engine-image", IMAGE)
    assert result.exit_code == 2
    assert "-o DIR" in result.stderr and result.stdout == ""


def test_help_ends_with_an_example():
    for cmd in (["ingest"], ["ingest", "inferencex"], ["ingest", "vllm-metrics"]):
        result = run(*cmd, "--help")
        assert result.exit_code == 0 and "Example:" in result.output, cmd


def test_both_readers_are_registered_sources():
    from registry_db.sources import get_source

    sets, findings = get_source("inferencex").read([f("draft_a")], engine_image=IMAGE)
    assert [ps.name for ps in sets] == ["draft_a"] and findings == []
    sets, findings = get_source("inferencex").read([f("draft_a")])
    assert sets == [] and [x.code for x in findings] == ["missing_engine_image"]
    assert get_source("vllm-metrics").NAME == "vllm-metrics"


# --- each header rule, on a small file written here -----------------------------------------------

HEADER = "# dataset: coding | temperature: 1.0\n# Measured on m (B300, vLLM MTP).\n"
BODY = "m:\n  thinking_on:\n    1: 1.5\n"


def curve(tmp_path, header: str = HEADER, body: str = BODY) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(header + body)
    return str(path)


@pytest.mark.parametrize("header, code, line", [
    # the spec's own sampling rules, said at the header line that states the value
    ("# Measured on m (B300, vLLM MTP).\n# dataset: coding | top_p: 1.5 | temperature: 1\n",
     "top_p_out_of_range", 2),
    ("# dataset: coding | temperature: 1 | top_k: -5\n# Measured on m (B300, vLLM MTP).\n",
     "top_k_out_of_range", 1),
    ("# dataset: coding | temperature: -0.1\n# Measured on m (B300, vLLM MTP).\n",
     "negative_temperature", 1),
    ("# dataset: coding | temperature: 1e999\n# Measured on m (B300, vLLM MTP).\n",
     "bad_header_value", 1),
    ("# temperature is 1.0\n# dataset: coding\n# Measured on m (B300, vLLM MTP).\n",
     "no_temperature", 1),
    ("# dataset: coding | temperature: 1.0\n", "no_method", 1),
    ("# Measured on m (B300, vLLM MTP).\n# temperature: 1.0\n", "no_category", 1),
    ("# dataset: Coding! | temperature: 1.0\n# Measured on m (B300, vLLM MTP).\n",
     "bad_category", 1),
    ("# dataset: coding | temperature: 1.0\n# Measured on m (vLLM MTP).\n", "no_hardware", 1),
    ("# dataset: coding | temperature: 1.0\n# speculative-config: method=mtp\n"
     "# Measured on m (B300, vLLM EAGLE3).\n", "conflicting_header", 3),
])
def test_header_refusals(tmp_path, header, code, line):
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([curve(tmp_path, header)], engine_image=IMAGE)
    errors = {(x.code, x.line) for x in exc.value.findings if x.is_error}
    # a missing "Measured on" line also leaves the hardware unknown: both are said
    assert errors == {(code, line)} | ({("no_hardware", 1)} if code == "no_method" else set())


@pytest.mark.parametrize("body, code", [
    ("m:\n  thinking_maybe:\n    1: 1.5\n", "unknown_mode"),
    ("m:\n  thinking_on:\n    1: fast\n", "bad_al"),
    ("m:\n  thinking_on: 1.5\n", "not_a_curve"),
    ("- m\n", "not_a_curve"),
    ("_metadata: {}\n", "not_one_model"),
])
def test_body_refusals(tmp_path, body, code):
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([curve(tmp_path, body=body)], engine_image=IMAGE)
    assert [x.code for x in exc.value.findings] == [code]


def test_a_value_the_reader_cannot_read_is_an_error_at_its_line_never_dropped(tmp_path):
    header = HEADER + '# thinking_on: chat_template_kwargs: {thinking: yes}\n'
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([curve(tmp_path, header)], engine_image=IMAGE)
    (finding,) = exc.value.findings
    assert (finding.code, finding.line, finding.column) == ("bad_header_value", 3, 38)
    assert "it is not JSON" in finding.message


def test_a_measured_on_model_other_than_the_values_key_is_a_warning(tmp_path):
    header = "# dataset: coding | temperature: 1.0\n# Measured on other (B300, vLLM MTP).\n"
    result = read_inferencex([curve(tmp_path, header)], engine_image=IMAGE)
    assert [(w.code, w.line, w.column) for w in result.warnings] == [("model_mismatch", 2, 15)]
    assert result.sets[0].profiles[0].model == "m"


def test_a_copied_curve_without_temperature_keeps_no_sampling_and_says_so(tmp_path):
    header = ("# dataset: coding | top_p: 0.9\n# copied from base's curve\n"
              "# Measured on base (B300, vLLM MTP).\n")
    result = read_inferencex([curve(tmp_path, header)])
    (p,) = result.sets[0].profiles
    assert (p.method, p.copied_from, p.provenance.sampling) == (
        "copied", "base/mtp/k1/thinking-on/coding", None)
    assert [w.code for w in result.warnings] == ["sampling_left_out"]


@pytest.mark.parametrize("line", ["copied from base's curve (base_mtp.yaml)",
                                  "Provisional: K=1 copied from the base curve.",
                                  "copied_from: base", "provisional, copied from base"])
def test_the_copied_from_phrasings_name_the_source_model(tmp_path, line):
    header = (f"# dataset: coding | temperature: 1.0\n# {line}\n"
              "# Measured on base (B300, vLLM MTP).\n")
    (p,) = read_inferencex([curve(tmp_path, header)]).sets[0].profiles
    assert (p.method, p.copied_from, p.rationale) == (
        "copied", "base/mtp/k1/thinking-on/coding", line)


def test_a_file_named_unlike_its_set_draws_a_warning(tmp_path):
    out = tmp_path / "golden.yaml"
    result = run("ingest", "inferencex", f("draft_a"), "--engine-image", IMAGE, "-o", out)
    assert result.exit_code == 0 and "give --name golden" in result.stderr
    named = run("ingest", "inferencex", f("draft_a"), "--engine-image", IMAGE, "--name",
                "golden", "-o", out)
    assert named.exit_code == 0 and "warning" not in named.stderr
    assert run("validate", out).stderr.count("warning") == 0


# --- issue 27: a repeated line, a BOM, a number past float ----------------------------------------

def test_two_header_lines_that_disagree_are_an_error_naming_both(tmp_path):
    header = HEADER + "# dataset: math | temperature: 0.5\n"
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([curve(tmp_path, header)], engine_image=IMAGE)
    found = sorted((f.line, f.column, f.message) for f in exc.value.findings)
    assert [(line, column) for line, column, _ in found] == [(3, 12), (3, 32)]
    assert "category is 'math' here but 'coding' on line 1" in found[0][2]
    assert "temperature is 0.5 here but 1.0 on line 1" in found[1][2]


def test_a_repeated_line_that_agrees_is_no_problem(tmp_path):
    (ps,) = read_inferencex([curve(tmp_path, HEADER + HEADER)], engine_image=IMAGE).sets
    assert ps.profiles[0].category == "coding"


def test_a_bom_before_the_header_is_read_past(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + BODY).encode())
    (ps,) = read_inferencex([str(path)], engine_image=IMAGE).sets
    assert (ps.profiles[0].category, ps.profiles[0].provenance.sampling.temperature) == (
        "coding", 1.0)


def test_a_temperature_past_float_is_a_one_line_error(tmp_path):
    path = curve(tmp_path, "# dataset: coding | temperature: 1e999\n"
                           "# Measured on m (B300, vLLM MTP).\n")
    result = run("ingest", "inferencex", path, "--engine-image", IMAGE)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        f"{path}:1:34: header: temperature '1e999' cannot be read: it is not a finite number; "
        "fix the header")


@pytest.mark.parametrize("text, found", [
    ("methods: {c.yaml: mtp}\nfiles: {c.yaml: {method: eagle3}}\n", ("map_disagrees", 2)),
    ("files: {c.yaml: {tp: -1}}\n", ("negative_count", 1)),
    ("files: {c.yaml: {sampling: {top_p: 2}}}\n", ("top_p_out_of_range", 1)),
    ("files: {c.yaml: {category: Coding}}\n", ("bad_category", 1)),
    ("files: {c.yaml: {chip: b300}}\n", ("unknown_key", 1)),
])
def test_a_map_files_entry_is_checked_by_the_specs_own_rows(tmp_path, text, found):
    path = tmp_path / "map.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as exc:
        load_map(str(path))
    assert [(x.code, x.line) for x in exc.value.findings] == [found]
