"""Ingested sets validate, import and resolve to exactly the source's values, on both backends.

Everything goes through the command line, as the README shows it: ``registry ingest`` writes
files, ``registry validate`` accepts them, ``registry import`` stores them, ``registry resolve``
answers with the source's number and the provenance its header gave.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from registry_db import store
from registry_db.model import Counts, Sampling
from registry_db.sources.counters.vllm import Facts, read_vllm_metrics
from registry_db.sources.inferencex.read import read_inferencex
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources"
IX = DATA / "inferencex"
IMAGE = "vllm/vllm-openai:v0.22.0"
BASE = "https://github.com/OWNER/REPO/blob/main/golden_al_distribution"



def resolve(url: str, *args: str) -> dict:
    result = run("-d", url, "resolve", "--json", *args)
    return json.loads(result.stdout)


def ingest_validate_import(url: str, out: Path, *ingest_args: str) -> None:
    assert run("ingest", *ingest_args, "-o", out).exit_code == 0
    checked = run("validate", out)
    assert checked.exit_code == 0 and "warning" not in checked.stderr, checked.stderr
    assert run("-d", url, "import", out).exit_code == 0


def test_inferencex_curves_resolve_to_the_golden_values(db_url, tmp_path):
    out = tmp_path / "acceptance"
    ingest_validate_import(db_url, out, "inferencex", IX / "example_eagle3.yaml",
                           IX / "copied_mtp.yaml", "--engine-image", IMAGE, "--source-base", BASE)
    got = resolve(db_url, "--model", "example-model-fp8", "--method", "eagle3", "--k", "2",
                  "--thinking", "on", "--category", "coding")
    assert got["acceptance_length"] == 2.2
    assert (got["layer"], got["profile_set"], got["source"]) == (
        "registry", "example_eagle3", f"{BASE}/example_eagle3.yaml")
    copied = resolve(db_url, "--model", "new-model", "--method", "mtp", "--k", "3",
                     "--thinking", "on", "--category", "coding")
    assert copied["acceptance_length"] == 2.99
    assert any("copied" in w for w in copied["warnings"])


def test_the_stored_sets_are_exactly_what_was_ingested(db_url, engine, tmp_path):
    files = [str(IX / f"{n}.yaml") for n in ("example_eagle3", "shared_sampling_mtp",
                                             "dspark_spaces", "one_mode")]
    ingested = read_inferencex(files, engine_image=IMAGE)
    ingest_validate_import(db_url, tmp_path / "a", "inferencex", *files, "--engine-image",
                           IMAGE)
    stored = {ps.name: ps for ps in store.load_sets(engine)}
    for ps in ingested.sets:
        # provenance (run, hardware, sampling, settings), values and keys, all of it
        assert stored[ps.name].content_hash() == ps.content_hash(), ps.name


def test_two_curves_of_one_key_import_side_by_side_and_conflict_until_a_set_is_named(
        db_url, tmp_path):
    ingest_validate_import(db_url, tmp_path / "a", "inferencex", IX / "draft_a.yaml",
                           IX / "draft_b.yaml", "--engine-image", IMAGE)
    key = ["--model", "twin-model", "--method", "eagle3", "--k", "1", "--thinking", "off",
           "--category", "coding"]
    refused = resolve(db_url, *key)
    assert refused["refused"]["reason"] == "conflict"
    assert resolve(db_url, *key, "--set", "draft_b")["acceptance_length"] == 1.74


def test_vllm_counters_resolve_to_the_exact_al_and_rates(db_url, engine, tmp_path):
    out = tmp_path / "acceptance" / "example-model-eagle3.yaml"
    ingest_validate_import(
        db_url, out, "vllm-metrics", DATA / "vllm" / "after.prom",
        "--before", DATA / "vllm" / "before.prom", "--model", "example-model",
        "--method", "eagle3", "--k", "3", "--thinking", "off", "--category", "coding",
        "--hardware", "b300", "--engine-image", IMAGE, "--temperature", "0.6",
        "--benchmark", "SPEED-Bench", "--prompts", "80")
    got = resolve(db_url, "--model", "example-model", "--method", "eagle3", "--k", "3",
                  "--thinking", "off", "--category", "coding")
    expected = read_vllm_metrics(
        str(DATA / "vllm" / "after.prom"), str(DATA / "vllm" / "before.prom"),
        Facts("example-model", "eagle3", 3, "off", "coding", "b300", IMAGE, Sampling(0.6)))
    profile = expected.sets[0].profiles[0]
    assert got["acceptance_length"] == profile.acceptance_length == 1 + 128899 / 84995
    assert got["per_position_rates"] == list(profile.per_position_rates)
    assert got["rates_derived"] is False
    (stored,) = store.load_sets(engine, ["example-model-eagle3"])
    pv = stored.profiles[0].provenance
    assert (pv.prompts, pv.benchmark, dict(pv.settings)["num_drafts"]) == (80, "SPEED-Bench",
                                                                         84995)


def test_the_readmes_ingest_example_runs_as_written(tmp_path, monkeypatch):
    """The README's end-to-end block, run from a folder that sees the repository's tests/."""
    readme = (DATA.parents[2] / "README.md").read_text()
    tail = readme.split("<!-- example: ingest -->", 1)[1]
    commands, shown = re.search(r"```sh\n(.*?)```\n```text\n(.*?)```", tail, re.S).groups()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REGISTRY_DATABASE_URL", raising=False)
    (tmp_path / "tests").symlink_to(DATA.parents[1])
    printed = []
    # A command continues on the lines that are indented under it.
    for line in re.sub(r"\\?\n(?= )", " ", commands).splitlines():
        program, *args = shlex.split(line)
        assert program == "registry"
        result = run(*args)
        assert result.exit_code == 0, (line, result.output)
        if args[0] in ("resolve", "query"):  # what the README shows they print
            printed.append(result.stdout)
    assert "".join(printed) == shown


REAL = IX / "real"
DSV41 = REAL / "wufann-InferenceX-ff6642645ac0" / "dsv41flash_dspark.yaml"
E2E = ("https://github.com/SemiAnalysisAI/InferenceX/blob/main/inferencex-e2e/infx/"
       "golden_al_distribution")


def test_the_specs_example_file_ingests_imports_and_resolves(db_url, tmp_path):
    """dsv41flash_dspark.yaml (wufann/InferenceX ff6642645ac0, README under real/)."""
    out = tmp_path / "acceptance"
    ingest_validate_import(db_url, out, "inferencex", DSV41, "--hardware", "b300",
                           "--prompts", "80", "--source-base", E2E)
    got = resolve(db_url, "--model", "deepseek-v4.1-flash", "--method", "dspark", "--k", "5",
                  "--thinking", "off", "--category", "coding")
    assert (got["acceptance_length"], got["source"]) == (4.07, f"{E2E}/dsv41flash_dspark.yaml")


def test_import_of_a_raw_curve_says_what_it_is_and_names_the_ingest_command(db_url):
    curve = REAL / "SemiAnalysisAI-InferenceX-f0711382f121" / "dsv4_mtp.yaml"
    for command in (["validate"], ["-d", db_url, "import"]):
        result = run(*command, curve)
        assert result.exit_code == 1
        (line, summary) = result.stderr.splitlines()
        assert line.startswith(f"{curve}:9:1: (document): this is an InferenceX golden AL curve")
        assert f"`registry ingest inferencex {curve} -o acceptance/`" in line
    assert json.loads(run("-d", db_url, "list", "--json").stdout) == []


def test_a_fifo_in_an_imported_folder_is_said_skipped(db_url, tmp_path):
    import os

    (tmp_path / "seed.yaml").write_text((DATA.parent / "valid" /
                                         "inferencex-golden-al.yaml").read_text())
    os.mkfifo(tmp_path / "x.yaml")
    for command in (["validate"], ["-d", db_url, "import"]):
        result = run(*command, tmp_path)
        assert result.exit_code == 0, result.output
        assert (f"{tmp_path / 'x.yaml'}: (document): warning: a FIFO (named pipe), not a "
                "regular file; skipped") in result.stderr


def test_a_curve_with_counter_comments_imports_its_counts(db_url, engine, tmp_path):
    """qwen3.827b_bf16_mtp.yaml (SemiAnalysisAI/InferenceX 67ba7fb5ee54, README under real/):
    each cell's counter comment is the stored profile's counts, with its standard error."""
    curve = REAL / "SemiAnalysisAI-InferenceX-67ba7fb5ee54" / "qwen3.827b_bf16_mtp.yaml"
    ingested = read_inferencex([str(curve)])
    ingest_validate_import(db_url, tmp_path / "acceptance", "inferencex", curve)
    (stored,) = store.load_sets(engine, ["qwen3.827b_bf16_mtp"])
    assert stored.content_hash() == ingested.sets[0].content_hash()
    assert {(p.thinking, p.num_spec_tokens): p.counts for p in stored.profiles}[("on", 3)] == (
        Counts(drafts=84142, draft_tokens=252426, accepted_tokens=126838))
    listed = json.loads(run("-d", db_url, "profiles", "--model", "qwen3.8-27b", "--k", "3",
                            "--thinking", "on", "--json").stdout)
    ((got,),) = [listed]
    assert got["acceptance_length"] == 2.51
    assert got["counts"] == {"drafts": 84142, "draft_tokens": 252426, "accepted_tokens": 126838}
    assert got["uncertainty"]["drafts"] == 84142 and got["uncertainty"]["exact"] is False
