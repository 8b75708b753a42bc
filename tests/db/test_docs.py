"""docs/schema.md stays true: its examples, its reference, its diagram, its constraints, its recipe.

Each example query runs through `registry query` on a database holding only the seed, on SQLite
and on PostgreSQL, and must print exactly the output the page shows. The column reference is
generated from registry_db.store.catalog and must match both the page and the reflected database.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from registry_db.cli.group import main
from registry_db.importing import write as importer
from registry_db.store import catalog as views
from registry_db.store.query import QueryError, parse_param, run_query
from tests.helpers import ROOT, SEED, reader_role, unique_name

SCHEMA_MD = ROOT / "docs" / "schema.md"

_EXAMPLE = re.compile(
    r"<!-- example: (?P<head>[^>]*?) -->\n```sql\n(?P<sql>.*?)```\n\n```text\n(?P<out>.*?)```",
    re.S)
_RECIPE = re.compile(r"<!-- recipe: (?P<name>[\w-]+) -->\n```sql\n(?P<sql>.*?)```", re.S)


@dataclass(frozen=True)
class Example:
    """One documented query: its name, its `-p` arguments, its SQL and the output shown."""

    name: str
    params: tuple[str, ...]
    sql: str
    output: str


def examples(document: str | None = None) -> list[Example]:
    """The examples of docs/schema.md, in page order."""
    document = SCHEMA_MD.read_text(encoding="utf-8") if document is None else document
    out = []
    for m in _EXAMPLE.finditer(document):
        name, *rest = shlex.split(m.group("head"))
        assert all(a == "-p" for a in rest[::2]), f"example {name}: only -p NAME=VALUE pairs"
        out.append(Example(name, tuple(rest[1::2]), m.group("sql"), m.group("out")))
    return out


def recipe(name: str) -> str:
    """The SQL of a recipe block."""
    for m in _RECIPE.finditer(SCHEMA_MD.read_text(encoding="utf-8")):
        if m.group("name") == name:
            return m.group("sql")
    raise AssertionError(f"docs/schema.md has no recipe {name!r}")


def run_example(url: str, example: Example) -> str:
    """What `registry query` prints for an example (stdout)."""
    args = ["-d", url, "query", example.sql]
    for p in example.params:
        args += ["-p", p]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, f"example {example.name}: {result.output}"
    return result.stdout


@pytest.fixture
def seeded_url(engine, db_url, backend, monkeypatch):
    """A database holding only the seed; on PostgreSQL queries run as a reader role, named by
    REGISTRY_QUERY_URL as the README sets it up (a superuser URL is refused)."""
    importer.import_paths(engine, [SEED])
    if backend != "postgresql":
        yield db_url
        return
    with reader_role(db_url) as url:
        monkeypatch.setenv("REGISTRY_QUERY_URL", url)
        yield db_url


# --- examples ------------------------------------------------------------------------------

EXAMPLES = examples()


def test_the_page_has_a_dozen_distinct_examples_each_with_an_order():
    names = [e.name for e in EXAMPLES]
    assert len(names) >= 12 and len(set(names)) == len(names)
    for e in EXAMPLES:
        assert "ORDER BY" in e.sql.upper(), f"example {e.name} needs ORDER BY (determinism)"
        assert e.output.strip(), f"example {e.name} shows no output"
        for p in e.params:
            parse_param(p)


def test_the_done_when_question_is_answered():
    """'Mean AL by model and K for measured coding profiles' in one `registry query`."""
    (e,) = [e for e in EXAMPLES if e.name == "mean-al-by-model-and-k"]
    assert "AVG(acceptance_length)" in e.sql and "acceptance_profiles" in e.sql
    assert set(e.params) == {"method=measured", "category=coding"}


def test_the_one_command_answer_prints_what_the_page_shows(seeded_url):
    """The shell command under example 1 is the same question, typed as an analyst would."""
    document = SCHEMA_MD.read_text(encoding="utf-8")
    command = re.search(r"```sh\n(registry query -p method=measured .*?)```", document, re.S)
    assert command, "docs/schema.md lost the one-command answer"
    argv = shlex.split(command.group(1))
    assert argv[:2] == ["registry", "query"]
    result = CliRunner().invoke(main, ["-d", seeded_url, *argv[1:]])
    (e,) = [e for e in EXAMPLES if e.name == "mean-al-by-model-and-k"]
    assert result.exit_code == 0, result.output
    assert result.stdout == e.output


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_prints_what_the_page_shows(seeded_url, example):
    assert run_example(seeded_url, example) == example.output


# --- reference: database, views.py and the page agree --------------------------------------------

def test_the_page_embeds_the_generated_reference():
    document = SCHEMA_MD.read_text(encoding="utf-8")
    for kind in ("view", "table"):
        assert views.embedded_reference(document, kind) == views.reference_markdown(kind), (
            "docs/schema.md is out of date: run python -c \"import registry_db.store.catalog as v; "
            "v.update_reference('docs/schema.md')\"")


def test_every_table_and_view_and_column_is_described(engine):
    insp = inspect(engine)
    assert set(insp.get_view_names()) == set(views.VIEWS)
    assert set(insp.get_table_names()) == set(views.TABLES)
    for name, rel in views.RELATIONS.items():
        reflected = tuple(c["name"] for c in insp.get_columns(name))
        assert reflected == rel.column_names, f"{name}: database {reflected}"
        assert all(c.meaning for c in rel.columns)


def test_the_stable_views_keep_the_contracts_columns(engine):
    insp = inspect(engine)
    for name, columns in views.CONTRACT_COLUMNS.items():
        present = {c["name"] for c in insp.get_columns(name)}
        assert set(columns) <= present, f"{name} lost {set(columns) - present}"


def test_the_diagram_shows_every_table_and_column(engine):
    document = SCHEMA_MD.read_text(encoding="utf-8")
    diagram = document.split("```mermaid\n", 1)[1].split("```", 1)[0]
    blocks = dict(re.findall(r"^    (\w+) \{\n(.*?)^    \}", diagram, re.S | re.M))
    insp = inspect(engine)
    assert set(blocks) == set(insp.get_table_names()) - {"alembic_version"}
    for table, body in blocks.items():
        shown = [line.split()[1] for line in body.strip().splitlines()]
        assert shown == [c["name"] for c in insp.get_columns(table)], table


def _constraint_names(engine) -> set[str]:
    insp = inspect(engine)
    names: set[str] = set()
    for table in insp.get_table_names():
        if table == "alembic_version":
            continue
        names.add(insp.get_pk_constraint(table)["name"])
        names.update(c["name"] for c in insp.get_check_constraints(table))
        names.update(c["name"] for c in insp.get_unique_constraints(table))
        names.update(c["name"] for c in insp.get_foreign_keys(table))
        names.update(c["name"] for c in insp.get_indexes(table))
    names.discard(None)
    return names


def test_every_constraint_is_documented(engine, backend):
    section = SCHEMA_MD.read_text(encoding="utf-8").split("## Constraints", 1)[1]
    section = section.split("\n## ", 1)[0]
    names = _constraint_names(engine)
    if backend == "sqlite":
        # SQLite does not keep primary-key names; PostgreSQL checks them.
        names = {n for n in names if not n.startswith("pk_")}
    assert len(names) > 30
    missing = sorted(n for n in names if f"`{n}`" not in section)
    assert not missing, f"docs/schema.md does not explain {missing}"


# --- the PostgreSQL read-only role -------------------------------------------------------------

@pytest.mark.only_backend("postgresql")
def test_the_read_only_recipe_gives_a_role_that_reads_and_cannot_write(seeded_url, backend):
    url = make_url(seeded_url)
    role = unique_name("analyst")
    sql = recipe("postgresql-read-only")
    sql = sql.replace("registry_analyst", role)
    sql = sql.replace("DATABASE registry ", f'DATABASE "{url.database}" ')
    owner = create_engine(seeded_url, isolation_level="AUTOCOMMIT")
    analyst_url = url.set(username=role, password=None).render_as_string(hide_password=False)
    try:
        with owner.connect() as conn:
            for statement in filter(str.strip, sql.split(";")):
                conn.execute(text(statement))
            # A later migration's table: the default privileges must cover it.
            conn.execute(text("CREATE TABLE later_table (x INTEGER)"))
        analyst = create_engine(analyst_url)
        try:
            with analyst.connect() as conn:
                assert conn.execute(text(
                    "SELECT COUNT(*) FROM acceptance_profiles")).scalar() == 3
                assert conn.execute(text("SELECT COUNT(*) FROM later_table")).scalar() == 0
            for write in ("INSERT INTO later_table VALUES (1)", "DELETE FROM profiles",
                          "CREATE TABLE mine (x INTEGER)", "DROP VIEW acceptance_profiles"):
                with analyst.connect() as conn:
                    # The role's own default is read-only; privileges refuse even read-write.
                    conn.execute(text("SET TRANSACTION READ WRITE"))
                    with pytest.raises(Exception) as info:
                        conn.execute(text(write))
                    assert "permission denied" in str(info.value) or "must be owner" in str(
                        info.value), write
        finally:
            analyst.dispose()
        # `registry query` works for the role, and its refusals still come from the database.
        assert run_query(analyst_url, "SELECT COUNT(*) AS n FROM acceptance_profiles").rows == (
            (3,),)
        with pytest.raises(QueryError):
            run_query(analyst_url, "DELETE FROM profiles")
    finally:
        with owner.connect() as conn:
            conn.execute(text("DROP TABLE IF EXISTS later_table"))
            conn.execute(text(f'REASSIGN OWNED BY "{role}" TO CURRENT_USER'))
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
        owner.dispose()
    with owner.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM pg_roles WHERE rolname = :r"),
                            {"r": role}).scalar() == 0
        assert conn.execute(text("SELECT COUNT(*) FROM profiles")).scalar() == 3
    owner.dispose()
