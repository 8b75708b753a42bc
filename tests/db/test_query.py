"""`registry query`: read-only by the database's refusal, parameters, output, exit codes.

Every write below is refused by the database (not by looking at the SQL), and each test that
tries one compares every table before and after.
"""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
from sqlalchemy import inspect, text

from registry_db import store
from registry_db.importing import write as importer
from registry_db.model import Profile, ProfileSet
from registry_db.store.query import QueryError, parse_param, parse_value, placeholders, run_query
from tests.helpers import reader_role, run_cli


@pytest.fixture(autouse=True)
def _as_reader(request, monkeypatch):
    """On PostgreSQL, queries run as a reader role (a superuser URL is refused): the role that
    `registry db reader` makes, named by REGISTRY_QUERY_URL as the README sets it up."""
    if "db_url" not in request.fixturenames or request.getfixturevalue("backend") != "postgresql":
        yield
        return
    with reader_role(request.getfixturevalue("db_url")) as url:
        monkeypatch.setenv("REGISTRY_QUERY_URL", url)
        yield


def q(url: str) -> str:
    """The URL queries run on: the reader's on PostgreSQL (see :func:`_as_reader`)."""
    return os.environ.get("REGISTRY_QUERY_URL", url)


def invoke(url: str, *args: str, input: str | None = None):
    """Run `registry -d URL query ARGS...`; no expected failure may show a traceback."""
    return run_cli("-d", url, "query", *args, input=input)


def snapshot(url: str) -> dict[str, list[tuple]]:
    """Every row of every table (and the list of tables and views), in a stable order."""
    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            insp = inspect(conn)
            out: dict[str, list[tuple]] = {
                "<relations>": [tuple(sorted(insp.get_table_names() + insp.get_view_names()))]}
            for table in insp.get_table_names():
                rows = conn.execute(text(f"SELECT * FROM {table}")).fetchall()
                out[table] = sorted((tuple(r) for r in rows), key=repr)
            return out
    finally:
        engine.dispose()


# --- parameters --------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, value", [
    ("5", 5), ("-12", -12), ("0", 0), ("1.5", 1.5), ("-0.25", -0.25), ("1e3", 1000.0),
    ("2E-2", 0.02),
    # Not JSON numbers: kept as text, exactly as typed.
    ("007", "007"), ("+5", "+5"), (".5", ".5"), ("5.", "5."), ("NaN", "NaN"),
    ("Infinity", "Infinity"), ("1e999", "1e999"), (" 5", " 5"), ("0x10", "0x10"), ("", ""),
    ("true", "true"), ("glm-5.3", "glm-5.3"),
])
def test_a_json_number_is_bound_as_a_number_anything_else_as_text(raw, value):
    got = parse_value(raw)
    assert got == value and type(got) is type(value)


def test_param_specs():
    assert parse_param("model=glm-5.3") == ("model", "glm-5.3")
    assert parse_param("x=a=b") == ("x", "a=b")
    assert parse_param("k=") == ("k", "")
    for bad in ("novalue", "=5", "two words=1", "1st=2"):
        with pytest.raises(ValueError):
            parse_param(bad)


def test_placeholders_skip_casts_and_escaped_colons():
    assert placeholders("SELECT :a, x::text, '12:30', 'a\\:b' FROM t WHERE y = :b_2") == {
        "a", "b_2"}


def test_parameters_bind_by_type(db_url):
    sql = ("SELECT model FROM acceptance_profiles WHERE num_spec_tokens = :k"
           " UNION ALL SELECT name FROM methods WHERE name = :m")
    result = run_query(q(db_url), sql, {"k": 5, "m": "copied"})
    assert result.rows == (("copied",),)
    result = invoke(db_url, "--json", "SELECT :n + 1 AS n, :f * 2 AS f, :s AS s",
                    "-p", "n=41", "-p", "f=0.25", "-p", "s=007")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 42, "f": 0.5, "s": "007"}]


def test_a_placeholder_without_a_value_is_refused(db_url):
    result = invoke(db_url, "SELECT name FROM methods WHERE name = :m")
    assert result.exit_code == 1
    assert ":m" in result.stderr and "-p m=VALUE" in result.stderr


def test_a_parameter_the_sql_does_not_use_is_refused(db_url):
    result = invoke(db_url, "SELECT name FROM methods WHERE name = :m", "-p", "m=x",
                    "-p", "model=y")
    assert result.exit_code == 1
    assert "-p model is not used" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["-p", "novalue"], "not NAME=VALUE"),
    (["-p", "a=1", "-p", "a=2"], "given twice"),
    (["--json", "--csv"], "cannot be used together"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    result = invoke(f"sqlite:///{tmp_path / 'r.db'}", "SELECT :a AS a", *args)
    assert result.exit_code == 2
    assert message in result.stderr


# --- output ------------------------------------------------------------------------------------

METHODS_SQL = ("SELECT name, LENGTH(name) AS letters FROM methods "
               "WHERE name LIKE '%ed' AND LENGTH(name) < 9 ORDER BY name")


def test_table_output(db_url):
    result = invoke(db_url, METHODS_SQL)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "name      letters\n"
        "--------  -------\n"
        "assumed         7\n"
        "copied          6\n"
        "measured        8\n")


def test_json_and_csv_output(db_url):
    result = invoke(db_url, "--json", METHODS_SQL)
    assert json.loads(result.stdout) == [
        {"name": "assumed", "letters": 7}, {"name": "copied", "letters": 6},
        {"name": "measured", "letters": 8}]
    result = invoke(db_url, "--csv", METHODS_SQL)
    assert result.stdout == "name,letters\nassumed,7\ncopied,6\nmeasured,8\n"


def test_no_rows_and_sql_from_stdin(db_url):
    result = invoke(db_url, "-", input="SELECT name FROM methods WHERE name = 'nope'")
    assert result.exit_code == 0
    assert result.stdout == "name\n----\n(no rows)\n"
    assert json.loads(invoke(db_url, "--json", "SELECT 1 AS a WHERE 1 = 0").stdout) == []


def test_numeric_comes_back_as_int_or_float_on_both_backends(db_url):
    result = run_query(q(db_url), "SELECT ROUND(CAST(2.5 AS NUMERIC), 3) AS r, "
                               "CAST(7 AS NUMERIC) AS n, "
                               "AVG(CAST(num_spec_tokens AS NUMERIC)) AS a "
                               "FROM acceptance_profiles")
    r, n, a = result.rows[0]
    assert (r, type(r)) == (2.5, float)
    assert (n, type(n)) == (7, int)
    assert a is None


def test_a_statement_without_a_result_set(db_url, backend):
    sql = "PRAGMA foreign_keys = ON" if backend == "sqlite" else "SET application_name = 'x'"
    result = invoke(db_url, sql)
    assert result.exit_code == 0
    assert result.stdout == "" and "no result set" in result.stderr
    assert json.loads(invoke(db_url, "--json", sql).stdout) == []


def test_percent_signs_and_escaped_colons_are_literal(db_url):
    result = run_query(q(db_url), "SELECT 'a%b' AS p, 'x\\:y' AS c, 'https://h/a:b' AS u")
    assert result.rows == (("a%b", "x:y", "https://h/a:b"),)


# --- refusals ------------------------------------------------------------------------------------

WRITES = {
    "insert": "INSERT INTO methods (name, description, allowed_in_profile, requires_provenance,"
              " requires_rationale, requires_copied_from, requires_measurement)"
              " VALUES ('x', 'x', TRUE, TRUE, TRUE, TRUE, TRUE)",
    "update": "UPDATE methods SET description = 'changed'",
    "delete": "DELETE FROM methods",
    "drop_table": "DROP TABLE profile_rates",
    "drop_view": "DROP VIEW acceptance_profiles",
    "create_table": "CREATE TABLE analyst_notes (x INTEGER)",
    "create_view": "CREATE VIEW v AS SELECT 1 AS one",
    "create_temp": "CREATE TEMP TABLE scratch (x INTEGER)",
    "create_index": "CREATE INDEX ix_x ON methods (description)",
}


@pytest.mark.parametrize("name", WRITES)
def test_writes_and_ddl_are_refused_by_the_database(db_url, name):
    before = snapshot(db_url)
    result = invoke(db_url, WRITES[name])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: refused: the connection is read-only (")
    assert snapshot(db_url) == before


HIDDEN = {
    "after_a_select": "SELECT 1; DELETE FROM methods",
    "after_a_comment": "SELECT 1 -- harmless\n; UPDATE methods SET description = 'x'",
    "after_commit": "COMMIT; DELETE FROM methods",
    # On PostgreSQL's simple protocol this would leave the read-only transaction and write.
    "read_write_again": {
        "postgresql": "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; COMMIT; "
                      "DELETE FROM methods",
        "sqlite": "PRAGMA query_only = OFF; DELETE FROM methods",
    },
}


@pytest.mark.parametrize("name", HIDDEN)
def test_a_second_statement_that_writes_is_refused(db_url, backend, name):
    before = snapshot(db_url)
    sql = HIDDEN[name] if isinstance(HIDDEN[name], str) else HIDDEN[name][backend]
    result = invoke(db_url, sql)
    assert result.exit_code == 1, result.output
    assert "refused: one statement at a time" in result.stderr
    assert snapshot(db_url) == before


def test_the_library_says_why(db_url):
    with pytest.raises(QueryError) as info:
        run_query(q(db_url), WRITES["delete"])
    assert info.value.reason == "read_only" and info.value.exit_code == 1
    with pytest.raises(QueryError) as info:
        run_query(q(db_url), HIDDEN["after_a_select"])
    assert info.value.reason == "one_statement"
    with pytest.raises(QueryError) as info:
        run_query(q(db_url), "SELECT nope FROM methods")
    assert info.value.reason == "sql"


@pytest.mark.only_backend("postgresql")
def test_a_write_inside_a_function_body_is_refused(db_url, backend):
    before = snapshot(db_url)
    result = invoke(db_url, "DO $$ BEGIN DELETE FROM methods; END $$")
    assert result.exit_code == 1 and "read-only" in result.stderr
    assert snapshot(db_url) == before


@pytest.mark.only_backend("sqlite")
def test_sqlite_cannot_attach_another_file(db_url, backend, tmp_path):
    target = tmp_path / "elsewhere.db"
    result = invoke(db_url, f"ATTACH 'file:{target}?mode=rwc' AS other")
    assert result.exit_code == 1 and "attached" in result.stderr
    assert not target.exists()


@pytest.mark.parametrize("sql, words", [
    ("SELEC name FROM methods", "syntax error"),
    ("SELECT nope FROM methods", "nope"),
    ("SELECT * FROM no_such_table", "no_such_table"),
])
def test_bad_sql_is_the_users_input_exit_1_with_the_databases_words(db_url, sql, words):
    result = invoke(db_url, sql)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: the query failed: ") and words in result.stderr


@pytest.mark.only_backend("sqlite")
def test_an_integer_sqlite_cannot_hold_is_exit_1(db_url, backend):
    result = invoke(db_url, "SELECT :n AS n", "-p", "n=99999999999999999999")
    assert result.exit_code == 1 and "out of range" in result.stderr


# --- the database ----------------------------------------------------------------------------

def test_a_missing_file_is_exit_3_and_not_created(tmp_path):
    """query only reads: it never creates a database (issue 16's safer default)."""
    path = tmp_path / "new.db"
    result = invoke(f"sqlite:///{path}", "SELECT version_num FROM alembic_version")
    assert result.exit_code == 3, result.output
    assert f"no registry at {path}" in result.stderr
    assert not path.exists()


def test_an_empty_file_is_no_registry_and_stays_empty(tmp_path):
    """query only reads: an empty file is not given the schema (issue 27.7; it once was)."""
    path = tmp_path / "new.db"
    path.touch()
    result = invoke(f"sqlite:///{path}", "SELECT version_num FROM alembic_version")
    assert result.exit_code == 3, result.output
    assert "no registry here" in result.stderr
    assert path.stat().st_size == 0


def test_an_old_schema_is_refused_exit_3(empty_url):
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine, "0001")
    finally:
        engine.dispose()
    result = invoke(empty_url, "SELECT 1 AS one")
    assert result.exit_code == 3
    assert "registry db upgrade" in result.stderr


def test_an_unreachable_database_is_exit_3(tmp_path):
    result = invoke(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'r.db'}", "SELECT 1")
    assert result.exit_code == 3
    result = invoke("postgresql://nobody@127.0.0.1:1/registry", "SELECT 1")
    assert result.exit_code == 3 and "cannot reach" in result.stderr


# --- SQL injection: names are data ------------------------------------------------------------

NASTY_SET = "x'); DROP TABLE profiles; --"
NASTY_MODEL = 'm"o\'d;el -- \'; DELETE FROM profile_sets; --'
NASTY_CATEGORY = "c--x"
NASTY_RATIONALE = "'); DELETE FROM profiles; -- \"quoted\"; ;"


def nasty_set() -> ProfileSet:
    profile = Profile(model=NASTY_MODEL, speculative_method="mtp;--", num_spec_tokens=2,
                      thinking="on", category=NASTY_CATEGORY, acceptance_length=2.5,
                      method="assumed", rationale=NASTY_RATIONALE)
    return ProfileSet(name=NASTY_SET, caveats=("it's; -- a caveat",), profiles=(profile,),
                      file="nasty.yaml")


def test_quotes_semicolons_and_comments_are_stored_and_queried_literally(engine, db_url):
    importer.import_sets(engine, [nasty_set()])
    before = snapshot(db_url)
    sql = ("SELECT profile_set, model, speculative_method, category, rationale, profile "
           "FROM acceptance_profiles WHERE model = :model AND profile_set = :set_name "
           "AND category = :category")
    expected = (NASTY_SET, NASTY_MODEL, "mtp;--", NASTY_CATEGORY, NASTY_RATIONALE,
                f"{NASTY_MODEL}/mtp;--/k2/thinking-on/{NASTY_CATEGORY}")
    result = invoke(db_url, "--json", sql, "-p", f"model={NASTY_MODEL}",
                    "-p", f"set_name={NASTY_SET}", "-p", f"category={NASTY_CATEGORY}")
    assert result.exit_code == 0, result.output
    assert [tuple(r.values()) for r in json.loads(result.stdout)] == [expected]

    # The same names as SQL literals (quotes doubled, as SQL spells them) in the views.
    literal = NASTY_SET.replace("'", "''")
    rows = run_query(q(db_url), "SELECT profile_set, profile_count, caveat_count "
                             f"FROM set_overview WHERE profile_set = '{literal}'").rows
    assert rows == ((NASTY_SET, 1, 1),)
    rows = run_query(q(db_url), "SELECT c.text FROM set_caveats c JOIN profile_sets s "
                             "ON s.id = c.set_id WHERE s.name = :n", {"n": NASTY_SET}).rows
    assert rows == (("it's; -- a caveat",),)

    # A value shaped like an injection matches nothing and runs nothing.
    result = invoke(db_url, "SELECT model FROM acceptance_profiles WHERE model = :m",
                    "-p", "m=' OR '1'='1")
    assert result.exit_code == 0 and "(no rows)" in result.stdout
    assert snapshot(db_url) == before


def test_names_from_a_yaml_file_survive_validation_import_and_query(engine, db_url, tmp_path):
    """The whole path an analyst's data takes: file, validator, importer, view, `-p`."""
    path = tmp_path / f"{NASTY_SET}.yaml"
    path.write_text(
        "kind: AcceptanceProfileSet\n"
        f"name: {json.dumps(NASTY_SET)}\n"
        "profiles:\n"
        f"  - model: {json.dumps(NASTY_MODEL)}\n"
        "    speculative_method: \"mtp'; --\"\n"
        "    num_spec_tokens: 3\n"
        "    thinking: \"off\"\n"
        f"    category: {NASTY_CATEGORY}\n"
        "    acceptance_length: 2.5\n"
        "    method: assumed\n"
        f"    rationale: {json.dumps(NASTY_RATIONALE)}\n", encoding="utf-8")
    importer.import_paths(engine, [path])
    result = invoke(db_url, "--csv", "SELECT profile_set, profile, rationale FROM "
                    "acceptance_profiles WHERE speculative_method = :m", "-p", "m=mtp'; --")
    assert result.exit_code == 0, result.output
    label = f"{NASTY_MODEL}/mtp'; --/k3/thinking-off/{NASTY_CATEGORY}"
    assert list(csv.reader(io.StringIO(result.stdout))) == [
        ["profile_set", "profile", "rationale"], [NASTY_SET, label, NASTY_RATIONALE]]
