"""The registry layer as SQL for any client: PostgreSQL's ``registry_resolve`` and
``registry_resolve_many`` (migration 0011) and SQLite's ``registry_resolve.sql``. Each is the
text the generator in ``registry_db/resolve/statements.py`` makes; the functions are read-only
and run as their caller, the reader role may call them and still only reads, and the
migration goes up and down with data in the registry."""

from __future__ import annotations

import importlib.util
import json
import tomllib
from importlib import resources

import psycopg
import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.importing import write as importer
from registry_db.resolve import statements
from registry_db.store import roles
from tests.helpers import (
    ROOT,
    SEED,
    SINCE_0012,
    differential_history,
    dump,
    reader_role,
    run_cli,
)

#: A run the seed answers (a copied profile measured on b300).
RUN = ("glm-5.3", "mtp", 3, "on", "coding")


def _migration(name: str = "0011_resolve_function"):
    spec = importlib.util.spec_from_file_location(
        "m" + name[:4], ROOT / "migrations" / "versions" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MANY = "0013_resolve_many_set_based"
SEVERAL = "0015_resolve_in_several_sets"


def _pg(url: str) -> psycopg.Connection:
    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                           autocommit=True)


def test_the_migration_carries_the_functions_the_statement_makes():
    """The frozen copy in 0015 is the generator's text: a changed statement fails here until a
    new migration replaces the functions."""
    migration, many, several = _migration(), _migration(MANY), _migration(SEVERAL)
    # 0011 made both, 0013 replaced registry_resolve_many, 0015 both; each downgrade puts the
    # previous text back.
    assert several.FUNCTION == statements.pg_function("__SCHEMA__")
    assert several.FUNCTION_MANY == statements.pg_many_function("__SCHEMA__")
    assert migration.FUNCTIONS.startswith(several.PREVIOUS + "\n")
    assert migration.FUNCTIONS[len(several.PREVIOUS):].lstrip("\n") == many.PREVIOUS
    assert several.PREVIOUS_MANY == many.FUNCTION
    assert "registry_resolve(" not in several.FUNCTION_MANY.split(
        "AS $registry_resolve_many$")[1]
    assert set(several.SIGNATURES) == set(statements.PG_FUNCTIONS)
    # db reader grants whichever is there: 0011's signature on a registry not yet at 0015
    assert set(roles.RESOLVE_FUNCTIONS) == set(statements.PG_FUNCTIONS) | {several.BEFORE}
    for name in ("0011_resolve_function", MANY, SEVERAL):
        assert "registry_db." not in (ROOT / "migrations" / "versions" / f"{name}.py").read_text()


def test_the_shipped_sql_file_is_the_statement():
    shipped = resources.files("registry_db.resolve").joinpath(statements.SQLITE_FILE)
    assert shipped.read_text(encoding="utf-8") == statements.sqlite_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert statements.SQLITE_FILE in config["tool"]["setuptools"]["package-data"][
        "registry_db.resolve"]


def test_every_lookup_form_is_in_the_statement_and_the_function():
    """One source: the resolver's one-run lookups, each of its four forms, inside both."""
    function = statements.pg_function("x")
    sql = statements.answer_statement("sqlite")
    for scoped in (0, 1):
        for as_of in (False, True):
            # the scoped forms keep the sets the statement's `named` lists (:set and :sets)
            lookup = statements.named_one_statement("sqlite", scoped, as_of).replace(
                "IN (:set_1)", "IN (SELECT name FROM named)")
            assert lookup in sql
            positional = statements.named_one_statement("postgresql", scoped, as_of).replace(
                "IN (:set_1)", "IN (SELECT name FROM named)")
            for i, name in enumerate(statements.ANSWER_PARAMETERS, 1):
                positional = positional.replace(f":{name}", f"${i}")
            assert positional in function


def test_a_run_in_at_most_one_set_reads_no_sets_on_sqlite():
    """SQLite's forms for a run naming at most one set (what ``resolve`` runs) are the
    statement with ``named`` read from :set alone: reading :sets cost 400 us a run in one
    process of two. The answers are the same (test_resolve_differential's one-run sample)."""
    full = statements.answer_statement("sqlite")
    assert "json_each(COALESCE(:sets" in full
    for scoped in (False, True):
        for as_of in (False, True):
            form = statements.answer_form(scoped, as_of)
            one = statements.answer_statement("sqlite", form, several=False)
            assert ":sets" not in one.split("found (")[0], (scoped, as_of)
            assert "json_each(COALESCE(:sets" in statements.answer_statement("sqlite", form)
            # PostgreSQL's function keeps its one text (frozen in migration 0015).
            assert statements.answer_statement("postgresql", form, several=False).count(
                "unnest(:sets)") == 1


@pytest.mark.only_backend("postgresql")
def test_the_functions_are_stable_invokers_with_a_pinned_search_path(db_url, backend):
    with _pg(db_url) as conn:
        rows = conn.execute(
            "SELECT p.proname, p.provolatile, p.prosecdef, p.proconfig, n.nspname "
            "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE p.proname LIKE 'registry_resolve%' ORDER BY p.proname").fetchall()
    assert [r[0] for r in rows] == ["registry_resolve", "registry_resolve_many"]
    for name, volatile, definer, config, schema in rows:
        assert volatile == "s" and definer is False, name
        assert f"search_path=pg_catalog, {schema}, pg_temp" in config, (name, config)


@pytest.mark.only_backend("postgresql")
def test_the_reader_calls_the_functions_and_still_only_reads(db_url, engine, backend):
    importer.import_paths(engine, [SEED])
    with reader_role(db_url) as url:
        with _pg(url) as conn:
            (outcome, profile, al) = conn.execute(
                "SELECT outcome, profile, acceptance_length FROM registry_resolve("
                "%s, %s, %s, %s, %s)", RUN).fetchone()
            many = conn.execute("SELECT run_index, outcome FROM registry_resolve_many(%s)",
                                (json.dumps([dict(zip(("model", "method", "k", "thinking",
                                                       "category"), RUN))] * 2),)).fetchall()
            # Past its read-only default, the role itself may not write.
            conn.execute("SET default_transaction_read_only = off")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("DELETE FROM profiles")
        assert (outcome, profile, al) == ("resolved", "glm-5.3/mtp/k3/thinking-on/coding", 2.99)
        assert many == [(0, "resolved"), (1, "resolved")]
        # `registry query`'s boundary: the reader has no power beyond reading, the grant
        # included, and may call the function there.
        result = run_cli("-d", db_url, "query", "--query-url", url, "--json",
                         "SELECT outcome FROM registry_resolve('glm-5.3', 'mtp', 3, 'on', "
                         "'coding')")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout) == [{"outcome": "resolved"}]
        with _pg(db_url) as admin:
            granted = admin.execute(
                "SELECT p.proname FROM pg_proc p, aclexplode(p.proacl) a "
                "WHERE p.proname LIKE 'registry_resolve%%' AND a.grantee = "
                "(SELECT oid FROM pg_roles WHERE rolname = %s) "
                "AND a.privilege_type = 'EXECUTE' ORDER BY 1",
                (url.split("://")[1].split("@")[0].split(":")[0],)).fetchall()
        assert granted == [("registry_resolve",), ("registry_resolve_many",)]


def _answer(url: str) -> tuple:
    with _pg(url) as conn:
        return conn.execute("SELECT * FROM registry_resolve(%s, %s, %s, %s, %s)", RUN).fetchone()


def _functions(url: str) -> int:
    with _pg(url) as conn:
        return conn.execute("SELECT COUNT(*) FROM pg_proc "
                            "WHERE proname LIKE 'registry_resolve%'").fetchone()[0]


@pytest.mark.only_backend("postgresql")
def test_the_migration_goes_up_and_down_with_data_on_postgresql(empty_url, backend):
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine, "0010")
        assert _functions(empty_url) == 0
        store.upgrade(engine)
        importer.import_paths(engine, [SEED])
        store.downgrade(engine, "0011")  # the registry as 0011 held it (0012's columns go)
        before, answer = dump(engine, skip=SINCE_0012), _answer(empty_url)
        assert answer[0] == "resolved"
        store.downgrade(engine, "0010")
        assert _functions(empty_url) == 0
        assert store.current_revision(engine) == "0010"
        assert dump(engine, skip=SINCE_0012) == before  # the data stays
        store.upgrade(engine, "0011")
        assert _functions(empty_url) == 2 and _answer(empty_url) == answer
        store.upgrade(engine)
        # 0013 down: 0011's registry_resolve_many (a call per run) again, same answers.
        many = _many(empty_url)
        assert "registry_resolve(" not in _many_source(empty_url)
        store.downgrade(engine, "0012")
        assert "CROSS JOIN LATERAL registry_resolve(" in _many_source(empty_url)
        assert _many(empty_url) == many and dump(engine, skip=SINCE_0012) == before
        store.upgrade(engine)
        assert "registry_resolve(" not in _many_source(empty_url) and _many(empty_url) == many
    finally:
        engine.dispose()


def _many(url: str) -> list[tuple]:
    runs = [dict(zip(("model", "method", "k", "thinking", "category"), RUN)),
            {"model": RUN[0], "method": RUN[1], "k": RUN[2], "thinking": RUN[3],
             "category": "poetry", "fallback_category": RUN[4], "hardware": "h100"},
            {"model": RUN[0], "method": RUN[1], "k": 9, "thinking": RUN[3], "category": "x"}]
    with _pg(url) as conn:
        return conn.execute("SELECT * FROM registry_resolve_many(%s)",
                            (json.dumps(runs),)).fetchall()


def _many_source(url: str) -> str:
    with _pg(url) as conn:
        return conn.execute("SELECT prosrc FROM pg_proc "
                            "WHERE proname = 'registry_resolve_many'").fetchone()[0]


@pytest.mark.only_backend("sqlite")
def test_the_migration_does_nothing_on_sqlite(empty_url, backend):
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine, "0010")
        importer_shape = _sqlite_shape(engine)
        store.upgrade(engine, "0011")
        assert _sqlite_shape(engine) == importer_shape
        store.downgrade(engine, "0010")
        assert _sqlite_shape(engine) == importer_shape
    finally:
        engine.dispose()


def _sqlite_shape(engine) -> list[tuple]:
    with engine.connect() as conn:
        return list(conn.execute(text(
            "SELECT type, name, sql FROM sqlite_master WHERE name <> 'alembic_version' "
            "ORDER BY type, name")).all())


def test_the_schema_page_describes_every_column():
    page = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    table = page.split("<!-- reference:registry_resolve -->", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1:3] for line in table.strip().splitlines()[2:]]
    assert [(name.strip().strip("`"), kind.strip()) for name, kind in rows] == list(
        statements.ANSWER_COLUMNS)


def _grants(url: str, role: str) -> list[tuple[str, str]]:
    """Who holds EXECUTE on the registry_resolve functions: (signature, role or PUBLIC)."""
    with _pg(url) as conn:
        return sorted(conn.execute(
            "SELECT p.oid::regprocedure::text, COALESCE(r.rolname, 'PUBLIC') "
            "FROM pg_proc p, aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a "
            "LEFT JOIN pg_roles r ON r.oid = a.grantee "
            "WHERE p.proname = 'registry_resolve' AND a.privilege_type = 'EXECUTE' "
            "AND (a.grantee = 0 OR r.rolname = %s)", (role,)).fetchall())


@pytest.mark.only_backend("postgresql")
def test_0015_takes_several_sets_and_keeps_answers_and_grants(empty_url, backend):
    """0015 up and down with data: a call with 0011's arguments answers as it did, a reader's
    grant and PUBLIC's revoked EXECUTE carry over both ways, and several sets are one scope."""
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine, "0014")
        importer.import_paths(engine, [SEED])
        before, answer, many = dump(engine), _answer(empty_url), _many(empty_url)
        with reader_role(empty_url) as url:
            role = url.split("://")[1].split("@")[0].split(":")[0]
            with _pg(empty_url) as conn:  # a DBA who kept the function from PUBLIC
                conn.execute("REVOKE EXECUTE ON FUNCTION registry_resolve(text, text, integer, "
                             "text, text, text, text, text, timestamptz) FROM PUBLIC")
            old = _grants(empty_url, role)
            assert [who for _, who in old] == [role]
            store.upgrade(engine)
            assert store.current_revision(engine) == "0015"
            assert _answer(empty_url) == answer and _many(empty_url) == many
            assert _grants(empty_url, role) == [(
                "registry_resolve(text,text,integer,text,text,text,text,text,timestamp with "
                "time zone,text[])", role)]
            with _pg(url) as conn:  # the reader calls it, with several sets too
                got = conn.execute(
                    "SELECT reason, set_count FROM registry_resolve(%s, %s, %s, %s, %s, "
                    "set_names => %s)", (*RUN, ["nope", "also-nope"])).fetchone()
                assert got == ("unknown_set", None)
            store.downgrade(engine, "0014")
            assert _grants(empty_url, role) == old
            assert _answer(empty_url) == answer and _many(empty_url) == many
            assert dump(engine) == before  # the data stays
            with _pg(empty_url) as conn, pytest.raises(psycopg.errors.UndefinedFunction):
                conn.execute("SELECT * FROM registry_resolve(%s, %s, %s, %s, %s, "
                             "set_names => %s)", (*RUN, ["x"]))
            store.upgrade(engine)
    finally:
        engine.dispose()


@pytest.mark.only_backend("postgresql")
def test_several_sets_are_one_scope(db_url, engine, backend, tmp_path):
    """set_name and set_names together are the scope (no names: every set): a key two named
    sets hold is a conflict between them, a set not stored is unknown, and
    registry_resolve_many reads them alike."""
    differential_history(db_url, engine, tmp_path)
    keys = ("model", "method", "k", "thinking", "category")
    with _pg(db_url) as conn:
        # a key two sets hold, and a set that holds no such key
        (*run, first, second) = conn.execute(
            "SELECT p.model, p.speculative_method, p.num_spec_tokens, p.thinking, p.category, "
            "min(s.name), max(s.name) FROM profiles p JOIN profile_sets s ON s.id = p.set_id "
            "GROUP BY 1, 2, 3, 4, 5 HAVING count(*) = 2 ORDER BY 1, 2, 3, 4, 5 LIMIT 1"
        ).fetchone()
        (other,) = conn.execute(
            "SELECT name FROM profile_sets WHERE name NOT IN (%s, %s) ORDER BY 1 LIMIT 1",
            (first, second)).fetchone()

        def one(set_name, set_names):
            return conn.execute(
                "SELECT outcome, reason, profile_set, set_count, conflict_sets FROM "
                "registry_resolve(%s, %s, %s, %s, %s, set_name => %s, set_names => %s)",
                (*run, set_name, set_names)).fetchone()

        alone = one(first, None)
        assert alone[:3] == ("resolved", None, first)
        assert one(None, [first]) == one(first, [first]) == alone
        assert one(None, [first, other]) == one(other, [first]) == alone
        assert one(None, []) == one(None, None) == one(None, [first, second])
        assert one(second, [first]) == ("refused", "conflict", None, 2,
                                        ", ".join(sorted((first, second))))
        assert one(None, [first, "no-such-set"])[:2] == ("refused", "unknown_set")
        many = conn.execute(
            "SELECT outcome, reason, profile_set, set_count, conflict_sets "
            "FROM registry_resolve_many(%s)", (json.dumps(
                [dict(zip(keys, run), set_names=[first, other]),
                 dict(zip(keys, run), set_name=second, set_names=[first]),
                 dict(zip(keys, run), set_names=[first, "no-such-set"])]),)).fetchall()
        assert many == [alone, one(second, [first]), one(None, [first, "no-such-set"])]
