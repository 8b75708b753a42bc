"""Everyday use (issue 16) on both backends: browsing profiles, the safer defaults, output that
people can read and scripts can rely on, and the conventions users bring with them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry_db.cli.group import COMMANDS, main
from tests.helpers import SEED, write_set
from tests.helpers import run_on as run

DSV = "deepseek-v4.1-flash"






# --- browsing without SQL -------------------------------------------------------------------------

def test_profiles_lists_every_profile_with_al_rate_method_set_source(seeded):
    rows = json.loads(run(seeded, "profiles", "--json").stdout)
    assert [r["profile"] for r in rows] == [
        f"{DSV}/dspark/k5/thinking-off/coding", f"{DSV}/dspark/k5/thinking-on/coding",
        "glm-5.3/mtp/k3/thinking-on/coding"]
    first = rows[0]
    assert first["acceptance_length"] == 4.07
    assert first["acceptance_rate"] == (4.07 - 1) / 5  # exact in JSON
    assert (first["method"], first["set"]) == ("measured", "inferencex-golden-al")
    assert first["source"].endswith("dsv41flash_dspark.yaml")
    assert (first["model"], first["speculative_method"], first["num_spec_tokens"],
            first["thinking"], first["category"]) == (DSV, "dspark", 5, "off", "coding")


def test_profiles_filters_combine(seeded):
    def labels(*args: str) -> list[str]:
        result = run(seeded, "profiles", "--json", *args)
        assert result.exit_code == 0, result.output
        return [r["profile"] for r in json.loads(result.stdout)]

    assert labels("--model", "glm-5.3") == ["glm-5.3/mtp/k3/thinking-on/coding"]
    assert labels("--method", "dspark", "--thinking", "on") == [
        f"{DSV}/dspark/k5/thinking-on/coding"]
    assert labels("--k", "5", "--category", "coding", "--thinking", "off") == [
        f"{DSV}/dspark/k5/thinking-off/coding"]
    assert labels("--k", "4") == []
    assert len(labels("--set", "inferencex-golden-al")) == 3


def test_profiles_by_set_and_unknown_set(db_url, tmp_path):
    write_set(tmp_path, "alpha", 2, model="m")
    write_set(tmp_path, "zeta", 1, model="m")
    run(db_url, "import", str(tmp_path))
    rows = json.loads(run(db_url, "profiles", "--json").stdout)
    # Ordered by key, then set: the shared key cat0 lists alpha before zeta.
    assert [(r["category"], r["set"]) for r in rows] == [
        ("cat0", "alpha"), ("cat0", "zeta"), ("cat1", "alpha")]
    only = json.loads(run(db_url, "profiles", "--json", "--set", "zeta").stdout)
    assert [(r["category"], r["set"]) for r in only] == [("cat0", "zeta")]
    unknown = run(db_url, "profiles", "--set", "zeat")
    assert unknown.exit_code == 1
    assert "did you mean 'zeta'" in unknown.stderr


def test_profiles_table_rounds_for_reading_and_csv_keeps_every_digit(seeded):
    table = run(seeded, "profiles", "--model", "glm-5.3")
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["profile", "acceptance_length", "acceptance_rate", "method",
                                "set", "source"]
    assert lines[2].split()[:4] == ["glm-5.3/mtp/k3/thinking-on/coding", "2.99", "0.6633",
                                    "copied"]
    [row] = csv.DictReader(io.StringIO(run(seeded, "profiles", "--csv", "--model",
                                           "glm-5.3").stdout))
    # CSV is for programs: every digit --json writes (issue 28.10).
    assert row["acceptance_rate"] == repr((2.99 - 1) / 3) and row["num_spec_tokens"] == "3"


def test_show_gives_rates_rationale_and_copied_from(own_seeded, tmp_path):
    text = run(own_seeded, "show", "inferencex-golden-al").stdout
    lines = text.splitlines()
    # After set, file, imported, revision, and git when the seed was read from a work tree.
    assert "per_position_rates" in lines[10 if lines[4].startswith("git:") else 9]
    assert "copied_from: glm-5.2-fp8/mtp/k3/thinking-on/coding" in text
    assert "rationale:   Provisional. GLM-5.3 shares GLM-5.2's base" in text
    rated = tmp_path / "rated.yaml"
    rated.write_text(
        "kind: AcceptanceProfileSet\nname: rated\nprofiles:\n"
        "  - {model: m, speculative_method: mtp, num_spec_tokens: 3, thinking: \"on\","
        " category: c, acceptance_length: 2.5, per_position_rates: [0.9, 0.6, 0.0],"
        " method: assumed, rationale: a guess}\n")
    assert run(own_seeded, "import", str(rated)).exit_code == 0
    shown = run(own_seeded, "show", "rated").stdout
    assert "0.9, 0.6, 0.0" in shown and "rationale:   a guess" in shown


def test_no_match_says_what_exists_for_the_model_and_method(seeded):
    result = run(seeded, "resolve", "--model", DSV, "--method", "dspark", "--k", "4",
                 "--thinking", "off", "--category", "chat", "--json")
    assert result.exit_code == 1
    refused = json.loads(result.stdout)["refused"]
    assert refused["reason"] == "no_match"
    assert refused["message"].endswith(
        f"stored for {DSV}/dspark there: K 5; thinking off, on; categories coding")
    none = json.loads(run(seeded, "resolve", "--model", "glm-5.3", "--method", "dspark",
                          "--k", "4", "--thinking", "off", "--category", "chat",
                          "--json").stdout)["refused"]
    assert none["message"].endswith("nothing is stored for glm-5.3/dspark there")
    fallback = json.loads(run(seeded, "resolve", "--model", "glm-5.3", "--method", "mtp",
                              "--k", "3", "--thinking", "on", "--category", "chat",
                              "--fallback-category", "math", "--json").stdout)["refused"]
    assert fallback["reason"] == "fallback_no_match"
    assert fallback["message"].endswith("K 3; thinking on; categories coding")


def test_no_match_counts_only_the_sets_in_scope(own_seeded, tmp_path):
    write_set(tmp_path, "other", 1, model=DSV)  # DSV/mtp/k3/on/cat0
    run(own_seeded, "import", str(tmp_path))
    scoped = run(own_seeded, "resolve", "--model", DSV, "--method", "mtp", "--k", "3",
                 "--thinking", "on", "--category", "coding", "--set", "inferencex-golden-al")
    assert scoped.exit_code == 1
    assert f"nothing is stored for {DSV}/mtp there" in scoped.stderr
    everywhere = run(own_seeded, "resolve", "--model", DSV, "--method", "mtp", "--k", "3",
                     "--thinking", "on", "--category", "coding")
    assert "categories cat0" in everywhere.stderr


def test_no_match_in_a_batch_says_what_exists(seeded, tmp_path):
    batch = tmp_path / "runs.jsonl"
    batch.write_text(
        json.dumps({"model": DSV, "method": "dspark", "k": 5, "thinking": "off",
                    "category": "coding"}) + "\n"
        + json.dumps({"model": DSV, "method": "dspark", "k": 6, "thinking": "off",
                      "category": "coding"}) + "\n")
    result = run(seeded, "resolve", "--batch", str(batch))
    first, second = [json.loads(line) for line in result.stdout.splitlines()]
    assert first["acceptance_length"] == 4.07
    assert second["refused"]["message"].endswith("K 5; thinking off, on; categories coding")


# --- safer defaults -------------------------------------------------------------------------------

READING = [("list",), ("show", "x"), ("profiles",), ("conflicts",), ("export", "-o", "-"),
           ("query", "SELECT 1"), ("coverage",), ("history",), ("history", "x"), ("diff", "x"),
           ("resolve", "--model", "m", "--method", "x", "--k", "1", "--thinking", "on",
            "--category", "c")]


@pytest.mark.parametrize("args", READING, ids=" ".join)
def test_reading_a_missing_sqlite_file_is_exit_3_and_creates_nothing(tmp_path, args):
    path = tmp_path / "registy.db"
    result = CliRunner().invoke(main, ["-d", str(path), *args])
    assert result.exit_code == 3, result.output
    assert f"no registry at {path}" in result.stderr
    assert not path.exists()


def test_batch_on_a_missing_sqlite_file_is_exit_3(tmp_path):
    path, batch = tmp_path / "none.db", tmp_path / "b.jsonl"
    batch.write_text('{"model": "m", "method": "x", "k": 1}\n')
    result = CliRunner().invoke(main, ["-d", str(path), "resolve", "--batch", str(batch)])
    assert result.exit_code == 3 and not path.exists()


def test_import_still_creates_the_database(tmp_path):
    path = tmp_path / "new.db"
    assert CliRunner().invoke(main, ["-d", str(path), "import", str(SEED)]).exit_code == 0
    assert path.exists()
    assert CliRunner().invoke(main, ["-d", str(path), "list"]).exit_code == 0


def test_export_refuses_to_overwrite_a_different_file(seeded, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    mine = out / "inferencex-golden-al.yaml"
    mine.write_text("# my notes\nkind: AcceptanceProfileSet\n")
    refused = run(seeded, "export", "-o", str(out))
    assert refused.exit_code == 1
    assert str(mine) in refused.stderr and "--force" in refused.stderr
    assert mine.read_text() == "# my notes\nkind: AcceptanceProfileSet\n"
    forced = run(seeded, "export", "--force", "-o", str(out))
    assert forced.exit_code == 0 and "# my notes" not in mine.read_text()
    # The same content again is no overwrite: no --force needed.
    assert run(seeded, "export", "-o", str(out)).exit_code == 0


def test_export_refusal_writes_none_of_the_sets(db_url, tmp_path):
    write_set(tmp_path / "in", "alpha", 1)
    write_set(tmp_path / "in", "beta", 1, model="b")
    run(db_url, "import", str(tmp_path / "in"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "beta.yaml").write_text("hand-written\n")
    assert run(db_url, "export", "-o", str(out)).exit_code == 1
    assert not (out / "alpha.yaml").exists()


# --- output people can read and scripts can rely on ---------------------------------------------

def test_resolve_text_rounds_numbers_and_json_stays_exact(seeded):
    args = ("resolve", "--model", DSV, "--method", "dspark", "--k", "5", "--thinking", "off",
            "--category", "coding")
    text = run(seeded, *args).stdout
    assert "rate     0.614\n" in text
    assert "rates    1.0, 1.0, 1.0, 0.07, 0.0  (derived" in text
    exact = json.loads(run(seeded, *args, "--json").stdout)
    assert exact["acceptance_rate"] == 0.6140000000000001
    assert exact["per_position_rates"][3] == 0.07000000000000028


def test_conflicts_check_exits_1_only_when_a_conflict_exists(own_seeded, tmp_path):
    clean = run(own_seeded, "conflicts", "--check")
    assert clean.exit_code == 0
    write_set(tmp_path, "one", 1, model="m")
    write_set(tmp_path, "two", 1, model="m")
    run(own_seeded, "import", str(tmp_path))
    found = run(own_seeded, "conflicts", "--check")
    assert found.exit_code == 1
    assert "m/mtp/k3/thinking-on/cat0" in found.stdout
    assert "1 conflicting profile key(s)" in found.stderr
    assert run(own_seeded, "conflicts").exit_code == 0


@pytest.mark.parametrize("command", ["list", "conflicts", "profiles", "query"])
def test_json_and_csv_together_is_a_usage_error(seeded, command):
    args = [command] + (["SELECT 1"] if command == "query" else []) + ["--json", "--csv"]
    result = run(seeded, *args)
    assert result.exit_code == 2
    assert "--json and --csv cannot be used together" in result.stderr


def test_every_listing_command_with_both_options_refuses_both():
    """Every command (present or future) with --json and --csv refuses them together."""
    runner = CliRunner()
    for name in COMMANDS:
        cmd = main.get_command(None, name)  # type: ignore[arg-type]
        opts = {o for p in cmd.params for o in getattr(p, "opts", ())}
        if {"--json", "--csv"} <= opts:
            result = runner.invoke(main, ["-d", "/nonexistent/none.db", name, "--json",
                                          "--csv"])
            assert result.exit_code == 2, (name, result.output)


def test_top_level_help_shows_each_commands_whole_first_sentence():
    runner = CliRunner()
    text = " ".join(runner.invoke(main, ["--help"]).stdout.split())
    for name in COMMANDS:
        cmd = main.get_command(None, name)  # type: ignore[arg-type]
        first = " ".join(cmd.help.split("\n\n")[0].split()).split(". ")[0]
        assert first.rstrip(".") in text, name
    assert "..." not in text.split("Commands:", 1)[1]
    db_text = " ".join(runner.invoke(main, ["db", "--help"]).stdout.split())
    assert "Downgrade the schema to REVISION (`base` removes it, data included)." in db_text


def test_readme_resolve_example_is_what_the_cli_prints(seeded):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("## Resolving: one acceptance per run", 1)[1]
    expected = block.split("```text\n", 1)[1].split("```", 1)[0]
    result = run(seeded, "resolve", "--model", DSV, "--method", "dspark", "--k", "5",
                 "--thinking", "off", "--category", "coding", "--hardware", "h200")
    assert result.stdout == expected


# --- the conventions users bring with them ----------------------------------------------------

def test_db_history_lists_the_migrations_newest_first():
    from registry_db import store

    result = CliRunner().invoke(main, ["-d", "/nonexistent/x.db", "db", "history"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("<base> -> 0001, Initial schema")
    assert f"-> {store.HEAD_REVISION} (head), " in lines[0]
    rows = json.loads(CliRunner().invoke(main, ["db", "history", "--json"]).stdout)
    assert rows[0]["revision"] == store.HEAD_REVISION and rows[0]["head"] is True
    assert rows[-1] == {"revision": "0001", "down_revision": None, "head": False,
                        "doc": rows[-1]["doc"]}
    assert [r["revision"] for r in rows] == sorted((r["revision"] for r in rows), reverse=True)


def test_db_stamp_and_repeated_downgrade(empty_url):
    from registry_db import store

    def db(*args: str):
        return CliRunner().invoke(main, ["-d", empty_url, "db", *args])

    assert db("upgrade").exit_code == 0
    assert "downgraded" in db("downgrade", "0001").stderr
    again = db("downgrade", "0001")
    assert again.exit_code == 0 and again.stderr.strip().endswith("already at 0001")
    stamped = db("stamp", "head")
    assert stamped.exit_code == 0
    assert f"stamped 0001 -> {store.HEAD_REVISION}" in stamped.stderr
    assert db("current").stdout.strip() == f"{store.HEAD_REVISION} (head)"
    unknown = db("stamp", "nope")
    assert unknown.exit_code == 1 and "Can't locate revision" in unknown.stderr
    assert "Traceback" not in unknown.output
    up_unknown = db("upgrade", "nope")
    assert up_unknown.exit_code == 1 and "Traceback" not in up_unknown.output
    # The stamp only recorded the head: stamping 0001 back and upgrading builds what it lacks
    # (and leaves a whole schema for the next test on this server).
    assert "stamped" in db("stamp", "0001").stderr
    assert f"upgraded 0001 -> {store.HEAD_REVISION}" in db("upgrade").stderr


def test_db_downgrade_and_stamp_never_create_a_file(tmp_path):
    path = tmp_path / "none.db"
    for args in (("downgrade", "0001"), ("stamp", "head")):
        result = CliRunner().invoke(main, ["-d", str(path), "db", *args])
        assert result.exit_code == 3 and f"no registry at {path}" in result.stderr
    assert not path.exists()


# --- imports that say what happened -------------------------------------------------------------

def test_overlap_warnings_are_one_summary_per_pair_of_sets(db_url, tmp_path):
    write_set(tmp_path, "one", 6, model="m")
    write_set(tmp_path, "two", 6, model="m")            # shares all six keys with one
    write_set(tmp_path, "three", 1, model="m")          # shares cat0 with one and two
    result = run(db_url, "import", str(tmp_path))
    assert result.exit_code == 0
    lines = [ln for ln in result.stderr.splitlines() if "profile key(s)" in ln]
    assert len(lines) == 3, result.stderr
    [one_two] = [ln for ln in lines if "'one' and 'two'" in ln]
    assert "share 6 profile key(s): m/mtp/k3/thinking-on/cat0, m/mtp/k3/thinking-on/cat1, " \
           "m/mtp/k3/thinking-on/cat2 and 3 more;" in one_two
    assert any("sets 'one' and 'three' share 1 profile key(s): m/mtp/k3/thinking-on/cat0;"
               in ln for ln in lines)
    # Re-importing unchanged files repeats no warning (`registry conflicts` lists them).
    again = run(db_url, "import", str(tmp_path))
    assert again.exit_code == 0
    assert [ln for ln in again.stderr.splitlines() if "profile key(s)" in ln] == []
    # Changing one set warns of its pairs again; the stored sets the import replaces are not
    # counted against themselves.
    write_set(tmp_path, "three", 1, model="m", al=2.6)
    changed = run(db_url, "import", str(tmp_path))
    assert [ln for ln in changed.stderr.splitlines() if "profile key(s)" in ln] == [
        ln for ln in lines if "'three'" in ln]


def test_quiet_drops_the_warnings(db_url, tmp_path):
    write_set(tmp_path, "one", 2, model="m")
    write_set(tmp_path, "two", 2, model="m")
    (tmp_path / "sub").mkdir()
    write_set(tmp_path / "sub", "three", 1, model="x")
    quiet = run(db_url, "import", "--quiet", str(tmp_path))
    assert quiet.exit_code == 0
    assert "warning" not in quiet.stderr
    assert "2 set(s): 0 added, 0 updated, 2 unchanged" in run(db_url, "import", "-q",
                                                                str(tmp_path)).stderr
    loud = run(db_url, "import", str(tmp_path))
    assert "warning" in loud.stderr


def test_a_set_that_moved_to_another_file_is_reported(db_url, tmp_path):
    first = write_set(tmp_path / "a", "x", 2)
    assert run(db_url, "import", str(first)).exit_code == 0
    second = write_set(tmp_path / "b", "x", 2)  # the same content in another file
    moved = run(db_url, "import", str(second))
    assert moved.stdout.rstrip("\n").endswith(f"{second}  (moved from {first})")
    listed = json.loads(run(db_url, "list", "--json").stdout)
    assert listed[0]["file"] == str(second)  # re-homed, though unchanged
    assert "moved from" not in run(db_url, "import", str(second)).stdout
    changed = write_set(tmp_path / "c", "x", 2, al=2.6)
    report = json.loads(run(db_url, "import", "--json", str(changed)).stdout)
    assert report["sets"] == [{"name": "x", "file": str(changed), "status": "updated",
                               "profiles": 2, "moved_from": str(second)}]


def test_another_spelling_of_the_same_file_is_no_move(db_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_set(tmp_path / "a", "x", 1)
    run(db_url, "import", "a/x.yaml")
    for spelling in ("./a/x.yaml", str(tmp_path / "a" / "x.yaml")):
        assert "moved" not in run(db_url, "import", spelling).stdout


def test_subfolders_with_yaml_files_are_reported_skipped(db_url, tmp_path):
    write_set(tmp_path, "top", 1)
    write_set(tmp_path / "nested" / "deeper", "low", 1, model="b")
    (tmp_path / "empty").mkdir()
    (tmp_path / ".hidden").mkdir()
    write_set(tmp_path / ".hidden", "secret", 1, model="c")
    result = run(db_url, "import", "--json", str(tmp_path))
    assert [s["name"] for s in json.loads(result.stdout)["sets"]] == ["top"]
    [line] = [ln for ln in result.stderr.splitlines() if "skipped" in ln]
    assert line.startswith(f"{tmp_path / 'nested'}: (document): warning: subfolder with "
                           "1 YAML file(s) skipped: folders are read one level deep")
    checked = CliRunner().invoke(main, ["validate", "--json", str(tmp_path)])
    codes = [p["code"] for p in json.loads(checked.stdout)["problems"]]
    assert codes == ["skipped_subfolder"]


# --- shell completion ----------------------------------------------------------------------------

def _complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash completion offers for the last word of ``words`` (click's protocol)."""
    parts = words.split(" ")
    result = CliRunner().invoke(main, [], prog_name="registry", env={
        "_REGISTRY_COMPLETE": "bash_complete", "COMP_WORDS": words,
        "COMP_CWORD": str(len(parts) - 1), **(env or {})})
    assert result.exit_code == 0, result.output
    return [line.split(",", 1)[1] for line in result.output.splitlines() if "," in line]


def test_completion_offers_set_names_where_a_set_is_named(db_url, tmp_path):
    write_set(tmp_path, "alpha", 1, model="a")
    write_set(tmp_path, "alpine", 1, model="b")
    write_set(tmp_path, "beta", 1, model="c")
    run(db_url, "import", str(tmp_path))
    for before in ("show", "export", "export alpha", "profiles --set",
                   "resolve --model m --set", "resolve --profiles", "diff", "history",
                   "delete", "delete beta"):
        assert _complete(f"registry -d {db_url} {before} al") == ["alpha", "alpine"], before
    assert _complete(f"registry -d {db_url} show ") == ["alpha", "alpine", "beta"]
    # The database can come from the environment, as for every command.
    assert _complete("registry show b", {"REGISTRY_DATABASE_URL": db_url}) == ["beta"]


def test_completion_never_creates_a_database_and_is_silent_on_errors(tmp_path):
    missing = tmp_path / "none.db"
    assert _complete(f"registry -d {missing} show ") == []
    assert not missing.exists()
    assert _complete("registry -d postgresql://nobody@127.0.0.1:1/x show ") == []
    not_a_registry = tmp_path / "other.db"
    not_a_registry.write_bytes(b"not sqlite at all")
    assert _complete(f"registry -d {not_a_registry} show ") == []


def test_readme_documents_completion():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert 'eval "$(_REGISTRY_COMPLETE=bash_source registry)"' in readme


# --- batch lines and scenario files ----------------------------------------------------------

RUN = {"model": DSV, "method": "dspark", "k": 5, "thinking": "off", "category": "coding"}


def _batch(url: str, tmp_path: Path, text: str):
    path = tmp_path / "runs.jsonl"
    path.write_text(text)
    result = run(url, "resolve", "--batch", str(path))
    return result, [json.loads(line) for line in result.stdout.splitlines()]


def test_batch_skips_blank_lines(seeded, tmp_path):
    line = json.dumps(RUN)
    result, answers = _batch(seeded, tmp_path, f"\n{line}\n   \n\t\n{line}\n\n")
    assert result.exit_code == 0
    assert [a["acceptance_length"] for a in answers] == [4.07, 4.07]
    # Refusals still name the line as the file numbers it.
    _, [bad] = _batch(seeded, tmp_path, '\n\n{"model": "m"}\n')
    assert bad["refused"]["message"].startswith("line 3: ")


def test_batch_echoes_any_json_id_first_in_its_answer(seeded, tmp_path):
    ids = [7, "run-a", {"sweep": 3, "tags": ["x"]}, [1, 2], 2.5, True]
    text = "".join(json.dumps({"id": i, **RUN}) + "\n" for i in ids)
    result, answers = _batch(seeded, tmp_path, text + json.dumps(RUN) + "\n")
    assert result.exit_code == 0
    assert [a.get("id") for a in answers] == [*ids, None]
    assert all(list(a)[0] == "id" for a in answers[:-1])
    assert "id" not in answers[-1]
    assert {k: v for k, v in answers[0].items() if k != "id"} == answers[-1]


def test_batch_echoes_the_id_of_refused_and_malformed_lines(seeded, tmp_path):
    lines = [{"id": "miss", **RUN, "k": 4},
             {"id": "bad-k", **RUN, "k": "5"},
             {"id": "bad-value", **RUN, "cli": {"num_spec_tokens": 5, "acceptance_length": 9}}]
    result, answers = _batch(seeded, tmp_path, "".join(json.dumps(x) + "\n" for x in lines)
                             + "not json\n")
    assert result.exit_code == 1
    assert [(a.get("id"), a["refused"]["reason"]) for a in answers] == [
        ("miss", "no_match"), ("bad-k", "invalid_request"), ("bad-value", "invalid_value"),
        (None, "invalid_request")]


def test_an_id_does_not_change_the_request(seeded):
    from registry_db.inputs.request import request_from_json

    assert request_from_json({**RUN, "id": {"a": 1}}) == request_from_json(RUN)
    assert request_from_json({**RUN, "id": [1]}).id == [1]


def test_a_scenario_without_acceptance_is_an_error_that_says_so(seeded, tmp_path):
    top = tmp_path / "scenario.yaml"
    top.write_text("name: my-run\nprofiles: inferencex-golden-al\n")
    result = run(seeded, "resolve", "--model", "glm-5.3", "--method", "mtp", "--k", "3",
                 "--thinking", "on", "--category", "coding", "--scenario", str(top))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert (f"{top}:1:1: acceptance: the scenario has no top-level `acceptance:` key; "
            "`profiles:` goes under it") in result.stderr
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: my-run\n")
    refused = run(seeded, "resolve", "--model", "glm-5.3", "--method", "mtp", "--k", "3",
                  "--thinking", "on", "--category", "coding", "--scenario", str(bare))
    assert refused.exit_code == 1 and "no top-level `acceptance:` key" in refused.stderr
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text("name: my-run\nacceptance:\n  profiles: inferencex-golden-al\n")
    ok = run(seeded, "resolve", "--model", "glm-5.3", "--method", "mtp", "--k", "3",
             "--thinking", "on", "--category", "coding", "--scenario", str(pinned), "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["layer"] == "scenario"


def test_overlap_between_two_stored_sets_is_not_this_imports_warning(db_url, tmp_path):
    write_set(tmp_path / "a", "one", 1, model="m")
    write_set(tmp_path / "a", "two", 1, model="m")
    run(db_url, "import", str(tmp_path / "a"))
    write_set(tmp_path / "b", "three", 1, model="m")
    result = run(db_url, "import", str(tmp_path / "b"))
    assert result.exit_code == 0
    lines = [ln for ln in result.stderr.splitlines() if "profile key(s)" in ln]
    assert len(lines) == 2 and all("'three'" in ln for ln in lines)


def test_every_parameter_that_names_a_set_completes_set_names():
    """A SET argument (show, export, and the history issue's diff, history, delete) and every
    --set / --profiles option complete from the registry: attach
    ``shell_complete=registry_db.cli.output.complete_set_names``."""
    import click

    from registry_db.cli.output import complete_set_names

    def walk(cmd: click.Command, path: str):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(None):  # type: ignore[arg-type]
                yield from walk(cmd.get_command(None, name), f"{path} {name}")  # type: ignore

    missing = []
    for path, cmd in walk(main, "registry"):
        for p in cmd.params:
            names_set = ((isinstance(p, click.Argument) and "SET" in (p.metavar or ""))
                         or (isinstance(p, click.Option)
                             and {"--set", "--profiles"} & set(p.opts)))
            if names_set and p._custom_shell_complete is not complete_set_names:
                missing.append(f"{path} {p.name}")
    assert missing == []
