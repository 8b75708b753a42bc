"""InferenceX's real golden curves: every line form, every file, counts, copies and the spec's
example, read from the copies in tests/data/sources/inferencex/real/ (its README names each
file's repository, path and commit; each folder is ``<owner>-<repo>-<commit[:12]>``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from registry_db.errors import InvalidInput
from registry_db.model import Counts
from registry_db.sources.inferencex.forms import FORMS, read_header
from registry_db.sources.inferencex.read import load_map, read_inferencex
from registry_db.sources.profile_set import check_paths
from tests.helpers import run_cli as run

REAL = Path(__file__).resolve().parents[1] / "data" / "sources" / "inferencex" / "real"
SEED = Path(__file__).resolve().parents[2] / "seed" / "acceptance" / "inferencex-golden-al.yaml"
MAIN = "SemiAnalysisAI-InferenceX-f0711382f121"   # main, 2026-08-19
CE4E = "SemiAnalysisAI-InferenceX-ce4e6f073750"   # "validate curves by draft model"
Q56 = "SemiAnalysisAI-InferenceX-5625e8038c3a"    # JSON block, counts on a header line
Q67 = "SemiAnalysisAI-InferenceX-67ba7fb5ee54"    # a run per mode, counter comments per cell
Q38 = "SemiAnalysisAI-InferenceX-4b2d885b44d6"    # Source evidence, wrapped "Measured on"
DSV41 = "wufann-InferenceX-ff6642645ac0/dsv41flash_dspark.yaml"   # the spec's example file
GLM53 = "hbarclay-InferenceX-c4c3f44e7240/glm5.3_mtp.yaml"        # the provisional copy
IMAGE = "vllm/vllm-openai:v0.22.0"
RUNS = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/"
E2E = ("https://github.com/SemiAnalysisAI/InferenceX/blob/main/inferencex-e2e/infx/"
       "golden_al_distribution")
REV = "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0"


def real(name: str) -> str:
    return str(REAL / name)


def facts_on(name: str, *lines: int) -> dict:
    """What the header of ``name`` states on ``lines``, as {(field, mode, K): value}."""
    h = read_header((REAL / name).read_text(encoding="utf-8"), real(name))
    return {f.key: f.value for f in h.facts.said if f.origin.line in lines}


def warned_on(name: str, *lines: int) -> list[str]:
    h = read_header((REAL / name).read_text(encoding="utf-8"), real(name))
    return [w.message for w in h.facts.findings if w.line in lines]


# --- each line form, from the real line it was made for -------------------------------------------

LINE_FORMS = [
    ("run", f"{MAIN}/dsv4_mtp.yaml", [1], {("run", None, None): RUNS + "27180633016"}),
    ("run per mode", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [1],
     {("run", "off", None): RUNS + "35492788796", ("run", "on", None): RUNS + "35492789880"}),
    ("evidence", f"{Q38}/qwen3.8_mtp.yaml", [1], {("run", None, None): (
        "https://github.com/rahulunair/qwen38-agentx/tree/1db65c09555636a19ccf1aa4c160f69dff397ba4"
        "/10-serve/acceptance/evidence/9306bc5ccdc73c15")}),
    ("lengths refused", DSV41, [2], {("caveat", None, None): (
        f"Draft lengths 6-8 rejected by the image (no measured AL): {RUNS}34494319147")}),
    ("benchmark", f"{MAIN}/dsv4_mtp.yaml", [2], {("benchmark", None, None): "SPEED-Bench"}),
    ("benchmark", DSV41, [3], {("benchmark", None, None): "SPEED-Bench Qualitative",
                               ("category", None, None): "coding"}),
    ("benchmark and cells", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [2], {
        ("benchmark", None, None): "SPEED-Bench Qualitative", ("category", None, None): "coding",
        ("prompts", None, None): 80, ("sampling.max_tokens", None, None): 4096}),
    ("workload", f"{Q56}/qwen3.827b_bf16_mtp.yaml", [3], {
        ("category", None, None): "coding", ("prompts", None, None): 80,
        ("sampling.max_tokens", None, None): 4096}),
    ("counts", f"{Q56}/qwen3.827b_bf16_mtp.yaml", [4],
     {("counts", "on", 3): Counts(drafts=84995, draft_tokens=254985, accepted_tokens=128899)}),
    ("thinking mode", f"{MAIN}/kimik2.5_eagle3.yaml", [5], {
        ("sampling.temperature", "off", None): 0.6,
        ("settings.chat_template_kwargs", "off", None): '{"thinking": false}'}),
    ("thinking mode", f"{MAIN}/qwen3.5_mtp.yaml", [5], {
        ("sampling.temperature", "off", None): 0.7, ("sampling.top_p", "off", None): 0.8,
        ("sampling.top_k", "off", None): 20, ("settings.presence_penalty", "off", None): 1.5,
        ("settings.chat_template_kwargs", "off", None): '{"enable_thinking": false}'}),
    ("thinking mode", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [8], {
        ("sampling.temperature", "on", None): 1.0, ("sampling.top_p", "on", None): 0.95,
        ("sampling.top_k", "on", None): 20, ("settings.presence_penalty", "on", None): 0.0,
        ("settings.chat_template_kwargs", "on", None): '{"enable_thinking":true}'}),
    ("thinking mode", f"{MAIN}/dsv4_mtp.yaml", [4], {
        ("settings.chat_template_kwargs", "on", None):
            '{"thinking": true, "reasoning_effort": "high"}'}),
    ("speculative-config", f"{MAIN}/dsv4-pro-0813-dspark.yaml", [5], {
        ("method", None, None): "dspark",
        ("settings.draft_sample_method", None, None): "probabilistic"}),
    ("measured on", f"{MAIN}/kimik3_dspark.yaml", [5], {
        ("model", None, None): "kimi-k3", ("hardware", None, None): "b300",
        ("method", None, None): "dspark", ("draft_model", None, None): "Inferact/Kimi-K3-DSpark"}),
    ("measured on", "wufann-InferenceX-0ab0bb892cca/qwen3.8next_mtp.yaml", [6], {
        ("model", None, None): "qwen3.8-flash-next-fp8", ("hardware", None, None): "b300",
        ("method", None, None): "mtp"}),
    # wrapped over two lines; the chip is written as no chip is ("four Intel Arc Pro B70")
    ("measured on", f"{Q38}/qwen3.8_mtp.yaml", [5, 6], {
        ("model", None, None): "qwen3.8-27b", ("method", None, None): "mtp",
        ("engine_image", None, None): "SGLang 0.0.0.dev15740+g1eee8fbdc.d20260728"}),
    ("key", f"{MAIN}/dsv4_mtp.yaml", [8], {("method", None, None): "mtp"}),
    ("key", DSV41, [10], {}),
    ("image", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [5], {
        ("engine_image", None, None):
            "vllm/vllm-openai:nightly-cd10ed6f9f6b37a8ace9cf380007e66fe12ec0c3",
        ("hardware", None, None): "h200", ("tp", None, None): 1,
        ("settings.concurrency", None, None): 64, ("settings.context", None, None): 16384,
        ("settings.seed", None, None): 0}),
    ("target", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [4], {
        ("settings.target_model", None, None): "Qwen/Qwen3.8-27B",
        ("settings.target_revision", None, None): REV,
        ("settings.target_weights", None, None): "bf16",
        ("settings.target_kv_cache", None, None): "fp8"}),
    ("MTP head", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [6], {
        ("method", None, None): "mtp", ("draft_model", None, None): "Qwen/Qwen3.8-27B",
        ("settings.draft_revision", None, None): REV,
        ("settings.draft_weights", None, None): "original BF16 weights, compute and KV cache"}),
    ("JSON block", f"{Q56}/qwen3.827b_bf16_mtp.yaml", range(5, 22), {
        ("settings.target_model", None, None): "Qwen/Qwen3.8-27B",
        ("settings.target_revision", None, None): REV,
        ("settings.precision", None, None): "bf16",
        ("engine_image", None, None):
            "vllm/vllm-openai:nightly-cd10ed6f9f6b37a8ace9cf380007e66fe12ec0c3",
        ("tp", None, None): 1, ("ks", None, None): (3,), ("modes", None, None): ("on",),
        ("category", None, None): "coding", ("sampling.max_tokens", None, None): 4096,
        ("settings.chat_template_kwargs", "on", None): '{"enable_thinking":true}',
        ("method", None, None): "mtp", ("draft_model", None, None): "Qwen/Qwen3.8-27B",
        ("settings.draft_revision", None, None): REV,
        ("settings.kv_cache_dtype", None, None): "auto",
        ("settings.concurrency", None, None): 64, ("settings.seed", None, None): 0,
        ("settings.speedbench_prepare_revision", None, None):
            "bcf059af55c20a89f797724598f9908d126153e6",
        ("settings.draft_snapshot", None, None): REV}),
    ("AL formula", f"{Q38}/qwen3.8_mtp.yaml", [11], {}),
    ("AL arithmetic", f"{Q38}/qwen3.8_mtp.yaml", [12], {}),
    ("collector", f"{MAIN}/dsv4_mtp.yaml", [6], {}),
    ("collector", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [12], {}),
    ("format notes", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [10, 11], {}),
    ("inherited", GLM53, [9], {}),
    ("name: value list", f"{MAIN}/dsv4_mtp.yaml", [3], {
        ("category", None, None): "coding", ("sampling.temperature", None, None): 1.0,
        ("sampling.max_tokens", None, None): 4096}),
    ("name: value list", DSV41, [4], {
        ("settings.target_model", None, None): "deepseek-ai/DeepSeek-V4.1-Flash",
        ("engine_image", None, None): "vllm/vllm-openai:deepseekv41-flash-0909",
        ("tp", None, None): 4}),
    ("name: value list", DSV41, [5], {("sampling.temperature", None, None): 1.0,
                                      ("sampling.max_tokens", None, None): 4096}),
    ("name: value list", DSV41, [8], {
        ("method", None, None): "dspark",
        ("settings.draft_sample_method", None, None): "probabilistic",
        ("settings.rejection_sample_method", None, None): "block"}),
    ("name: value list", DSV41, [9], {
        ("settings.enable_adaptive_verification", None, None): False,
        ("settings.engram cpu_offload", None, None): True}),
    ("name: value list", f"{CE4E}/minimaxm3_eagle3_gqa.yaml", [6],
     {("draft_model", None, None): "Inferact/MiniMax-M3-EAGLE3-GQA"}),
    ("name: value list", f"{Q67}/qwen3.827b_bf16_mtp.yaml", [3], {
        ("settings.prepared_dataset_sha256", None, None):
            "e9bbbe998472b79501ed79ba2bf126e58b63e153a6deef70ce2b63ea7a4de845"}),
]


@pytest.mark.parametrize("form, name, lines, expected", LINE_FORMS,
                         ids=[f"{row[0]}:{Path(row[1]).name}:{list(row[2])[0]}"
                              for row in LINE_FORMS])
def test_each_line_form_fills_its_fields_from_the_real_line(form, name, lines, expected):
    assert facts_on(name, *lines) == expected
    # the wrapped "Measured on" names three items that are no chip; nothing else is unread
    unread = ["'dense'", "'AWQ-INT4-g128'", "'four Intel Arc Pro B70'"] if name.startswith(
        Q38) and 5 in lines else []
    assert [m.split(" in this line")[0] for m in warned_on(name, *lines)] == unread


def test_every_row_of_the_table_has_a_real_line():
    assert {row[0] for row in LINE_FORMS} == {form.name for form in FORMS}


# --- every real file: ingested exactly, or refused naming what supplies what is missing ---------

#: file -> the errors of a bare ingest, and the warnings (line, code) it draws in any case
FILES = {
    **{f"{folder}/{name}": ({"missing_engine_image"}, set())
       for folder in (MAIN, "DRZDONG-InferenceX-d57d071ca6b6") for name in (
        "dsv4_mtp.yaml", "kimik2.5_eagle3.yaml", "kimik3_dspark.yaml",
        "kimik3_dspark_probabilistic_sample_method_block_rejection_sample_method.yaml",
        "minimaxm3_eagle3.yaml", "minimaxm3_eagle3_gqa.yaml", "qwen3.5_mtp.yaml")},
    **{f"{MAIN}/{name}": ({"missing_engine_image"}, set())
       for name in ("dsv4-pro-0813-dspark.yaml", "glm5.2_mtp.yaml")},
    **{f"{CE4E}/{name}": ({"missing_engine_image"}, set())
       for name in ("minimaxm3_eagle3.yaml", "minimaxm3_eagle3_gqa.yaml")},
    "SemiAnalysisAI-InferenceX-86a9eaa8f428/dsv4_dspark_probabilistic.yaml":
        ({"missing_engine_image"}, set()),
    "wufann-InferenceX-0ab0bb892cca/qwen3.8next_mtp.yaml": ({"missing_engine_image"}, set()),
    DSV41: ({"no_hardware"}, set()),
    f"{Q67}/qwen3.827b_bf16_mtp.yaml": (set(), {(7, "unknown_header_line")}),
    f"{Q67}/qwen3.827b_fp8_mtp.yaml": (set(), {(7, "unknown_header_line")}),
    f"{Q56}/qwen3.827b_bf16_mtp.yaml": ({"no_hardware", "no_temperature"},
                                        {(2, "unknown_header_line")}),
    f"{Q56}/qwen3.827b_fp8_mtp.yaml": ({"no_hardware", "no_temperature"},
                                       {(2, "unknown_header_line"), (5, "unknown_header_line")}),
    f"{Q38}/qwen3.8_mtp.yaml": ({"no_hardware"}, {(5, "unknown_header_item")} | {
        (line, "unknown_header_line") for line in (7, 8, 9, 10, 13, 14, 15)}),
    "SemiAnalysisAI-InferenceX-1cbf9c35495f/dsv4_dspark_probabilistic.yaml": (
        {"missing_engine_image", "no_hardware", "no_category", "no_method", "no_temperature"},
        set()),
    "SemiAnalysisAI-InferenceX-86a9eaa8f428/dsv4_0813_dspark_probabilistic.yaml": (
        {"missing_engine_image", "no_hardware", "no_category", "no_temperature"},
        {(1, "unknown_header_line"), (2, "unknown_header_line"), (3, "unknown_header_line")}),
    GLM53: ({"copied_source_unknown"}, set()),
}
#: what each refusal's message names, and what a test then gives
SUPPLY = {
    "missing_engine_image": ("--engine-image IMAGE", {"engine_image": IMAGE}),
    "no_hardware": ("--hardware CHIP", {"hardware": "b300"}),
    "no_category": ("--category C", {"category": "coding"}),
    "no_method": ("{method: METHOD}", {"method": "dspark"}),
    "no_temperature": ("{sampling: {temperature: T}}", {"sampling": {"temperature": 1.0}}),
    "copied_source_unknown": ("files: {glm5.2_mtp.yaml: {model: MODEL}}", {}),
}


def test_the_table_holds_every_real_file():
    assert set(FILES) == {f"{p.parent.name}/{p.name}" for p in REAL.glob("*/*.yaml")}


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_real_file_ingests_exactly_or_is_refused_naming_what_supplies_it(name, tmp_path):
    errors, warnings = FILES[name]
    if errors:
        with pytest.raises(InvalidInput) as exc:
            read_inferencex([real(name)])
        found = exc.value.findings
        assert {f.code for f in found if f.is_error} == errors
        for f in found:
            if f.is_error:
                assert SUPPLY[f.code][0] in f.message, f.render()
    # what the messages named, given by a map entry for the file (flags are tested apart)
    entry: dict = {}
    for code in errors:
        entry.update(SUPPLY[code][1])
    lines = ["files:", f"  {Path(name).name}: {entry or '{}'}"]
    if name == GLM53:
        lines.append("  glm5.2_mtp.yaml: {model: glm-5.2-fp8}")
    (tmp_path / "map.yaml").write_text("\n".join(lines) + "\n")
    result = read_inferencex([real(name)], curve_map=load_map(str(tmp_path / "map.yaml")))
    assert {(w.line, w.code) for w in result.warnings} == warnings
    (ps,) = result.sets
    body = yaml.safe_load((REAL / name).read_text(encoding="utf-8"))
    (model,) = [k for k in body if k != "_metadata"]
    cells = {(mode.removeprefix("thinking_"), k): al
             for mode, values in body[model].items() for k, al in values.items()}
    assert {(p.thinking, p.num_spec_tokens): p.acceptance_length for p in ps.profiles} == cells
    # a counter comment's numbers are the profile's counts, exactly
    comments = {}
    mode = None
    for line in (REAL / name).read_text(encoding="utf-8").splitlines():
        if m := re.match(r"  thinking_(on|off):", line):
            mode = m[1]
        if m := re.match(r"    (\d+): \S+  # AR=\S+; accepted=(\d+); proposed=(\d+); drafts=(\d+)",
                         line):
            comments[(mode, int(m[1]))] = Counts(int(m[4]), int(m[3]), int(m[2]))
    counted = {(p.thinking, p.num_spec_tokens): p.counts for p in ps.profiles if p.counts}
    if name.startswith(Q56):
        assert counted == {("on", 3): next(iter(facts_on(name, 4).values()))}
    else:
        assert counted == comments


def test_a_real_file_whose_header_states_everything_needs_no_flag():
    (ps,) = read_inferencex([real(f"{Q67}/qwen3.827b_fp8_mtp.yaml")]).sets
    on3 = next(p for p in ps.profiles if (p.thinking, p.num_spec_tokens) == ("on", 3))
    pv = on3.provenance
    assert (on3.model, on3.speculative_method, on3.category, on3.method) == (
        "qwen3.8-27b-fp8", "mtp", "coding", "measured")
    assert (pv.run, pv.benchmark, pv.prompts, pv.hardware, pv.tp) == (
        RUNS + "35492787451", "SPEED-Bench Qualitative", 80, "h200", 1)
    assert (pv.sampling.temperature, pv.sampling.top_p, pv.sampling.top_k,
            pv.sampling.max_tokens) == (1.0, 0.95, 20, 4096)
    assert dict(pv.settings)["draft_model"] == "Qwen/Qwen3.8-27B"
    assert on3.counts == Counts(drafts=88567, draft_tokens=265701, accepted_tokens=134722)
    off = next(p for p in ps.profiles if p.thinking == "off").provenance
    assert off.run == RUNS + "35492786441" and off.sampling.temperature == 0.7


def test_the_draft_model_tells_the_gqa_minimax_curve_from_the_plain_one():
    plain, gqa = (read_inferencex([real(f"{CE4E}/{n}")], engine_image=IMAGE).sets[0]
                  for n in ("minimaxm3_eagle3.yaml", "minimaxm3_eagle3_gqa.yaml"))
    assert dict(plain.profiles[0].provenance.settings)["draft_model"] == (
        "Inferact/MiniMax-M3-EAGLE3")
    assert dict(gqa.profiles[0].provenance.settings)["draft_model"] == (
        "Inferact/MiniMax-M3-EAGLE3-GQA")


# --- the spec's example ---------------------------------------------------------------------------

def test_the_specs_example_profiles_come_from_dsv41flash_dspark_with_no_hand_edit(tmp_path):
    result = run("ingest", "inferencex", real(DSV41), "--hardware", "b300", "--prompts", "80",
                 "--source-base", E2E, "-o", tmp_path)
    assert result.exit_code == 0, result.output
    (ours,), findings = check_paths([tmp_path])
    assert findings == []
    (spec,), _ = check_paths([SEED])
    got = {p.key: p for p in ours.profiles}
    examples = [p for p in spec.profiles if p.model == "deepseek-v4.1-flash"]
    assert [(p.thinking, p.num_spec_tokens, p.acceptance_length) for p in examples] == [
        ("off", 5, 4.07), ("on", 5, 3.51)]
    for want in examples:
        have = got[want.key]
        assert (have.acceptance_length, have.method) == (want.acceptance_length, want.method)
        a, b = have.provenance, want.provenance
        for name in ("source", "run", "benchmark", "prompts", "hardware", "engine_image", "tp",
                     "sampling"):
            assert getattr(a, name) == getattr(b, name), name
        # the spec's settings, and what else the file states (chat template, the drafter's)
        assert set(b.settings) <= set(a.settings)
    assert ours.caveats == (
        f"Draft lengths 6-8 rejected by the image (no measured AL): {RUNS}34494319147",)


# --- copies ---------------------------------------------------------------------------------------

def test_a_copy_names_the_model_of_the_file_it_was_copied_from_and_keeps_all_its_reasoning():
    result = read_inferencex([real(GLM53), real(f"{MAIN}/glm5.2_mtp.yaml")],
                             engine_image=IMAGE, source_base=E2E)
    copy = next(ps for ps in result.sets if ps.name == "glm5.3_mtp").profiles[0]
    assert (copy.method, copy.copied_from) == ("copied", "glm-5.2-fp8/mtp/k3/thinking-on/coding")
    prose = [line[2:] for line in (REAL / GLM53).read_text().splitlines()[:7] if line[2:]]
    assert copy.rationale == " ".join(prose) and len(prose) == 6
    pv = copy.provenance
    assert (pv.hardware, pv.engine_image, pv.run) == ("b300", None, RUNS + "28058352479")
    assert (pv.sampling.temperature, pv.sampling.top_p, pv.sampling.max_tokens) == (
        1.0, 0.95, 4096)


def test_a_copy_never_takes_a_measurement_from_the_flags(tmp_path):
    (tmp_path / "map.yaml").write_text("files: {glm5.2_mtp.yaml: {model: glm-5.2-fp8}}\n")
    result = read_inferencex([real(GLM53)], curve_map=load_map(str(tmp_path / "map.yaml")),
                             engine_image=IMAGE, hardware="h100", tp=8, benchmark="B",
                             prompts=5, category="coding")
    pv = result.sets[0].profiles[0].provenance
    # the chip is its source's, from the header's inherited provenance; the flags' never
    assert (pv.hardware, pv.engine_image, pv.tp, pv.benchmark, pv.prompts) == (
        "b300", None, None, "SPEED-Bench", None)


def test_a_copy_finds_its_source_beside_it(tmp_path):
    for name in (GLM53, f"{MAIN}/glm5.2_mtp.yaml"):
        shutil.copy(REAL / name, tmp_path)
    (ps,) = read_inferencex([str(tmp_path / "glm5.3_mtp.yaml")]).sets
    assert ps.profiles[0].copied_from == "glm-5.2-fp8/mtp/k3/thinking-on/coding"


def test_the_specs_copied_example_comes_from_glm5_3_with_a_map(tmp_path):
    (tmp_path / "map.yaml").write_text("models: {glm-5.3-fp8: glm-5.3}\n"
                                       "files: {glm5.2_mtp.yaml: {model: glm-5.2-fp8}}\n")
    result = read_inferencex([real(GLM53)], curve_map=load_map(str(tmp_path / "map.yaml")),
                             source_base=E2E)
    (have,) = result.sets[0].profiles
    (spec,), _ = check_paths([SEED])
    want = next(p for p in spec.profiles if p.model == "glm-5.3")
    assert have.key == want.key and have.copied_from == want.copied_from
    for name in ("source", "run", "hardware", "sampling"):
        assert getattr(have.provenance, name) == getattr(want.provenance, name), name


def test_a_copy_is_checked_against_its_source(tmp_path):
    shutil.copy(REAL / GLM53, tmp_path)
    source = (REAL / MAIN / "glm5.2_mtp.yaml").read_text()
    (tmp_path / "glm5.2_mtp.yaml").write_text(source.replace("    3: 2.99\n", "    3: 2.98\n"))
    result = read_inferencex([str(tmp_path / "glm5.3_mtp.yaml")])
    assert [w.code for w in result.warnings] == ["copied_value_differs"]
    (tmp_path / "glm5.2_mtp.yaml").write_text(source.replace("    3: 2.99\n", ""))
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([str(tmp_path / "glm5.3_mtp.yaml")])
    assert [f.code for f in exc.value.findings] == ["copied_cell_missing"]


def test_a_map_entry_cannot_give_a_copy_a_chip_or_image(tmp_path):
    (tmp_path / "map.yaml").write_text("files:\n  glm5.3_mtp.yaml: {hardware: h100}\n"
                                       "  glm5.2_mtp.yaml: {model: glm-5.2-fp8}\n")
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([real(GLM53)], curve_map=load_map(str(tmp_path / "map.yaml")))
    ((code, line),) = {(f.code, f.line) for f in exc.value.findings}
    assert (code, line) == ("copy_not_measured", 2)


# --- what the user says, per file -----------------------------------------------------------------

def test_each_file_gets_its_own_map_entry_and_the_entry_wins_over_a_flag(tmp_path):
    (tmp_path / "map.yaml").write_text(
        "files:\n"
        "  qwen3.827b_bf16_mtp.yaml: {hardware: h200, sampling: {temperature: 1.0}}\n"
        "  qwen3.827b_fp8_mtp.yaml: {sampling: {temperature: 0.6, top_p: 0.95}}\n")
    result = read_inferencex([real(Q56)], hardware="b300",
                             curve_map=load_map(str(tmp_path / "map.yaml")))
    got = {ps.name: ps.profiles[0].provenance for ps in result.sets}
    assert (got["qwen3.827b_bf16_mtp"].hardware, got["qwen3.827b_fp8_mtp"].hardware) == (
        "h200", "b300")
    assert got["qwen3.827b_fp8_mtp"].sampling.top_p == 0.95
    assert got["qwen3.827b_bf16_mtp"].sampling.temperature == 1.0


@pytest.mark.parametrize("kwargs, map_text, said", [
    ({"hardware": "b300"}, None, "--hardware b300 differs from the header's hardware 'h200' "
                                 "(line 5)"),
    ({"tp": 8}, None, "--tp 8 differs from the header's tp 1 (line 5)"),
    ({"benchmark": "SPEED-Bench"}, None, "--benchmark SPEED-Bench differs from the header's "
                                         "benchmark 'SPEED-Bench Qualitative' (line 2)"),
    ({}, "files: {qwen3.827b_bf16_mtp.yaml: {engine_image: other:v1}}",
     "files.qwen3.827b_bf16_mtp.yaml.engine_image in "),
])
def test_a_flag_or_entry_that_disagrees_with_the_header_is_an_error_naming_both(
        tmp_path, kwargs, map_text, said):
    if map_text:
        (tmp_path / "map.yaml").write_text(map_text + "\n")
        kwargs["curve_map"] = load_map(str(tmp_path / "map.yaml"))
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([real(f"{Q67}/qwen3.827b_bf16_mtp.yaml")], **kwargs)
    (finding,) = [f for f in exc.value.findings if f.is_error]
    assert finding.code == "flag_disagrees" and said in finding.message


def test_a_flag_that_agrees_with_the_header_is_fine():
    read_inferencex([real(f"{Q67}/qwen3.827b_bf16_mtp.yaml")], hardware="H200", tp=1)


# --- a folder with bad files ----------------------------------------------------------------------

def test_a_folder_with_bad_files_writes_nothing_and_lists_every_files_problems(tmp_path):
    out = tmp_path / "out"
    result = run("ingest", "inferencex", real(Q56), real(f"{Q67}/qwen3.827b_fp8_mtp.yaml"),
                 "-o", out)
    assert result.exit_code == 1 and not out.exists()
    for name in ("qwen3.827b_bf16_mtp.yaml", "qwen3.827b_fp8_mtp.yaml"):
        assert f"{real(Q56)}/{name}:1:1: header: the file states no hardware" in result.stderr


def test_keep_going_writes_the_good_files_and_exits_1_naming_the_rest(tmp_path):
    out = tmp_path / "out"
    good = real(f"{Q67}/qwen3.827b_fp8_mtp.yaml")
    result = run("ingest", "inferencex", real(Q56), good, "--keep-going", "-o", out)
    assert result.exit_code == 1
    assert sorted(p.name for p in out.iterdir()) == ["qwen3.827b_fp8_mtp.yaml"]
    assert (f"2 input(s) refused and not written: {real(Q56)}/qwen3.827b_bf16_mtp.yaml, "
            f"{real(Q56)}/qwen3.827b_fp8_mtp.yaml") in result.stderr
    as_json = run("ingest", "inferencex", real(Q56), good, "--keep-going", "-o", out, "--json")
    assert as_json.exit_code == 1 and '"refused": [' in as_json.stdout
    # nothing good: nothing written, and still exit 1
    none = run("ingest", "inferencex", real(Q56), "--keep-going", "-o", tmp_path / "none")
    assert none.exit_code == 1 and not (tmp_path / "none").exists()


# --- counts ---------------------------------------------------------------------------------------

def edited(tmp_path: Path, name: str, old: str, new: str) -> str:
    """A copy of real file ``name`` with one line changed (the test says how)."""
    text = (REAL / name).read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / Path(name).name
    path.write_text(text.replace(old, new), encoding="utf-8")
    return str(path)


Q67_BF16 = f"{Q67}/qwen3.827b_bf16_mtp.yaml"
ON3 = "    3: 2.51  # AR=0.502475973156; accepted=126838; proposed=252426; drafts=84142"


def test_an_al_that_disagrees_with_its_counts_is_a_warning_naming_both(tmp_path):
    path = edited(tmp_path, Q67_BF16, ON3, ON3.replace("2.51", "2.50"))
    result = read_inferencex([path])
    (w,) = [w for w in result.warnings if w.code == "al_disagrees_with_counts"]
    assert (w.line, w.column) == (22, 8)
    assert "AL 2.50 is not 1 + accepted / drafts = 1 + 126838 / 84142 = 2.50743" in w.message
    p = next(p for ps in result.sets for p in ps.profiles
             if (p.thinking, p.num_spec_tokens) == ("on", 3))
    assert p.acceptance_length == 2.5  # the file's value is kept, with its counts
    assert p.counts == Counts(84142, 252426, 126838)


def test_an_al_further_from_its_counts_than_the_spec_allows_is_refused_at_its_cell(tmp_path):
    path = edited(tmp_path, Q67_BF16, ON3, ON3.replace("2.51", "2.60"))
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([path])
    (error,) = [f for f in exc.value.findings if f.is_error]
    assert (error.line, error.column, error.path) == (22, 8, "counts")
    assert "they must agree within 0.01" in error.message


@pytest.mark.parametrize("comment, said", [
    ("AR=0.9; accepted=126838; proposed=252426; drafts=84142", "AR=0.9 is not accepted / "
                                                               "proposed = 0.502476"),
    ("accepted=126838; drafts=84142", "counts need all of accepted, proposed and drafts"),
    ("accepted=126838; proposed=252426; drafts=84142; rejected=5", "'rejected=5' is not a "
                                                                   "counter"),
])
def test_a_counter_comment_the_reader_cannot_use_whole_is_a_warning(tmp_path, comment, said):
    path = edited(tmp_path, Q67_BF16, ON3, ON3.split("# ")[0] + "# " + comment)
    result = read_inferencex([path])
    (w,) = [w for w in result.warnings if w.code == "bad_counts"]
    assert w.line == 22 and said in w.message


def test_counts_on_a_header_line_and_a_cell_that_disagree_are_an_error(tmp_path):
    path = edited(tmp_path, f"{Q56}/qwen3.827b_bf16_mtp.yaml", "    3: 2.52\n",
                  "    3: 2.52  # AR=0.5; accepted=128899; proposed=254985; drafts=84994\n")
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([path], hardware="b300")
    errors = [f for f in exc.value.findings if f.code == "conflicting_header"]
    assert [(f.line, f.column) for f in errors] == [(24, 16)]
    assert "on line 4" in errors[0].message


def test_a_copy_whose_source_beside_it_is_no_curve_says_so(tmp_path):
    shutil.copy(REAL / GLM53, tmp_path)
    (tmp_path / "glm5.2_mtp.yaml").write_text("glm-5.2-fp8: [1.84]\n")
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([str(tmp_path / "glm5.3_mtp.yaml")])
    (finding,) = exc.value.findings
    assert finding.code == "copied_source_unreadable" and "not_a_curve" not in finding.message
    assert f"{tmp_path / 'glm5.2_mtp.yaml'}:1:" in finding.message


def test_a_json_block_that_lists_other_cells_than_the_body_is_a_warning(tmp_path):
    path = edited(tmp_path, f"{Q56}/qwen3.827b_bf16_mtp.yaml", '"MTP_LIST": "3"',
                  '"MTP_LIST": "3 4"')
    with pytest.raises(InvalidInput) as exc:  # still no temperature: the warning is said too
        read_inferencex([path], hardware="b300")
    (w,) = [f for f in exc.value.findings if f.code == "header_body_differ"]
    assert (w.line, w.message) == (11, "the header lists 3 4 but the body holds 3")


def test_metadata_the_reader_does_not_know_is_a_warning(tmp_path):
    path = edited(tmp_path, f"{CE4E}/minimaxm3_eagle3.yaml", "_metadata:\n",
                  "_metadata:\n  note: re-run\n")
    result = read_inferencex([path], engine_image=IMAGE)
    assert [(w.code, w.line) for w in result.warnings] == [("unknown_metadata", 12)]


def test_the_readmes_map_reads_the_specs_two_example_files(tmp_path):
    readme = (REAL.parents[4] / "README.md").read_text()
    sections = re.findall(r"`((?:files|models): \{.*?\})`", readme)
    assert len(sections) == 2
    (tmp_path / "map.yaml").write_text("\n".join(sections) + "\n")
    for name in (GLM53, f"{MAIN}/glm5.2_mtp.yaml"):  # the copy's source beside it
        shutil.copy(REAL / name, tmp_path)
    result = read_inferencex([real(DSV41), str(tmp_path / "glm5.3_mtp.yaml")],
                             curve_map=load_map(str(tmp_path / "map.yaml")))
    got = {ps.name: ps.profiles for ps in result.sets}
    assert got["dsv41flash_dspark"][0].provenance.hardware == "b300"
    (copy,) = got["glm5.3_mtp"]
    assert (copy.model, copy.copied_from) == ("glm-5.3", "glm-5.2-fp8/mtp/k3/thinking-on/coding")
    assert result.warnings == ()
