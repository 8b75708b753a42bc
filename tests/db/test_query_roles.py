"""PostgreSQL's query boundary, third round: every attribute, membership and grant that lets a
role act beyond reading (outside any transaction, or on the whole server) refuses `registry
query` (issue 27.1), and the role `registry db reader` makes may do nothing but read, even
through psql (issue 27.4).

Roles belong to the whole server and other sessions' tests run at the same time: every role
here has a uuid-suffixed name and is dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import create_engine, text

from registry_db.importing import write as importer
from registry_db.store import roles
from registry_db.store.urls import parse_url
from tests.helpers import SEED, run_cli, unique_name

pytestmark = pytest.mark.only_backend("postgresql")


def _name(prefix: str) -> str:
    return unique_name(prefix)


@pytest.fixture
def seeded(db_url, engine, backend):
    importer.import_paths(engine, [SEED])
    return db_url


@pytest.fixture
def admin(backend, pg_session_url) -> Iterator:
    """Run SQL as the test's superuser (autocommit), in the session's database."""
    eng = create_engine(pg_session_url, isolation_level="AUTOCOMMIT")

    def run(sql: str, **params):
        with eng.connect() as conn:
            return conn.execute(text(sql), params).fetchall() if params or sql.lstrip(
            ).upper().startswith("SELECT") else conn.execute(text(sql))

    yield run
    eng.dispose()


def _drop(admin, *names: str) -> None:
    for name in names:
        if admin("SELECT 1 FROM pg_roles WHERE rolname = :n", n=name):
            admin(f'DROP OWNED BY "{name}"')
            admin(f'DROP ROLE "{name}"')


@pytest.fixture
def reader(seeded, admin) -> Iterator[tuple[str, str]]:
    """A reader made by `registry db reader`: (its name, its URL); dropped afterwards."""
    name = _name("reader")
    result = run_cli("-d", seeded, "db", "reader", name)
    assert result.exit_code == 0, result.stderr
    try:
        yield name, result.stdout.strip()
    finally:
        _drop(admin, name)


def _query(seeded: str, url: str, sql: str = "SELECT 1 AS one"):
    return run_cli("-d", seeded, "query", "--query-url", url, sql)


# --- 27.1: every power refuses the query, each named ---------------------------------------------

#: What a role may be given, as SQL (``{r}`` the role, ``{db}`` the database) and the words of
#: the refusal that names it.
GIVEN = {
    "superuser": ("ALTER ROLE {r} SUPERUSER", "is a superuser"),
    "createrole": ("ALTER ROLE {r} CREATEROLE", "may create roles"),
    "replication": ("ALTER ROLE {r} REPLICATION", "may replicate (REPLICATION"),
    "bypassrls": ("ALTER ROLE {r} BYPASSRLS", "bypasses row-level security (BYPASSRLS)"),
    "createdb": ("ALTER ROLE {r} CREATEDB", "may create databases (CREATEDB)"),
    "create_on_database": ("GRANT CREATE ON DATABASE {db} TO {r}",
                           "may create schemas in the database"),
    "reload_conf": ("GRANT EXECUTE ON FUNCTION pg_reload_conf() TO {r}",
                    "may run pg_reload_conf(), which PostgreSQL keeps from PUBLIC"),
    "stat_reset": ("GRANT EXECUTE ON FUNCTION pg_stat_reset() TO {r}",
                   "may run pg_stat_reset()"),
    "switch_wal": ("GRANT EXECUTE ON FUNCTION pg_switch_wal() TO {r}", "may run pg_switch_wal()"),
    "replication_origin": ("GRANT EXECUTE ON FUNCTION pg_replication_origin_create(text) TO {r}",
                           "may run pg_replication_origin_create(text)"),
}


def test_every_attribute_of_the_catalog_is_in_the_table():
    """The table of attributes names every pg_roles attribute that grants a power (all but
    INHERIT, LOGIN and the connection limit, which give nothing of their own)."""
    assert {a for _, a, _ in roles.ATTRIBUTES} == {
        "SUPERUSER", "CREATEROLE", "REPLICATION", "BYPASSRLS", "CREATEDB"}


@pytest.mark.parametrize("power", sorted(GIVEN))
def test_a_role_given_a_power_is_refused_naming_it(power, seeded, admin, reader):
    name, url = reader
    grant, words = GIVEN[power]
    db = parse_url(seeded).database
    admin(grant.format(r=f'"{name}"', db=f'"{db}"'))
    result = _query(seeded, url)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert f"{name} {words}" in result.stderr
    assert result.stdout == ""


def _predefined(admin) -> list[str]:
    return [r for (r,) in admin("SELECT rolname FROM pg_roles WHERE rolname = ANY(:n) "
                                "ORDER BY 1", n=list(roles.POWERFUL_ROLES))]


def test_a_member_of_each_powerful_predefined_role_is_refused(seeded, admin, reader):
    name, url = reader
    found = _predefined(admin)
    assert "pg_signal_backend" in found and "pg_write_all_data" in found
    for role in found:
        admin(f'GRANT {role} TO "{name}"')
        try:
            result = _query(seeded, url)
            assert result.exit_code == 1, (role, result.stderr)
            assert f"{name} is a member of {role}" in result.stderr
        finally:
            admin(f'REVOKE {role} FROM "{name}"')
    assert _query(seeded, url).exit_code == 0


def test_an_attribute_of_a_role_one_may_become_is_refused(seeded, admin, reader):
    """SET ROLE gives the other role's attributes (a slot made after `SET ROLE g` is g's)."""
    name, url = reader
    other = _name("repl")
    admin(f'CREATE ROLE "{other}" NOLOGIN REPLICATION')
    admin(f'GRANT "{other}" TO "{name}"')
    try:
        result = _query(seeded, url)
        assert result.exit_code == 1, result.stderr
        assert f"{other} may replicate" in result.stderr
    finally:
        _drop(admin, other)


def test_a_security_definer_function_the_role_may_run_is_refused(seeded, admin, reader):
    name, url = reader
    function = _name("definer")
    admin(f"CREATE FUNCTION public.{function}() RETURNS int LANGUAGE sql SECURITY DEFINER "
          "AS 'SELECT 1'")
    try:
        result = _query(seeded, url)
        assert result.exit_code == 1, result.stderr
        assert f"may run {function}(), a SECURITY DEFINER function of postgres" in result.stderr
    finally:
        admin(f"DROP FUNCTION public.{function}()")


def test_a_replication_role_makes_no_slot(seeded, admin, reader):
    """The red team's case: a REPLICATION reader created and dropped slots from `registry
    query` (a slot is not transactional: it survives the read-only rollback and pins WAL)."""
    name, url = reader
    slot = _name("slot")
    admin(f'ALTER ROLE "{name}" REPLICATION')
    try:
        result = _query(seeded, url, f"SELECT pg_create_physical_replication_slot('{slot}', "
                                     "true) AS s")
        assert result.exit_code == 1, result.stderr
        assert admin("SELECT slot_name FROM pg_replication_slots WHERE slot_name = :s",
                     s=slot) == []
    finally:
        admin("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
              "WHERE slot_name = :s", s=slot)


def test_the_monitoring_roles_only_read_and_pass(seeded, admin, reader):
    """pg_monitor's members may list the server's log and WAL folders (PostgreSQL grants them
    those functions): reading, not acting, so the query runs."""
    name, url = reader
    admin(f'GRANT pg_monitor TO "{name}"')
    result = _query(seeded, url)
    assert result.exit_code == 0, result.stderr


# --- 27.4: the reader, as psql sees it -----------------------------------------------------------

def _as(url: str, seeded: str) -> psycopg.Connection:
    """A psql-like session as the role in ``url`` (no registry code in the way), with the
    read-only default switched off, as any user of psql may."""
    parts = parse_url(seeded)
    role = parse_url(url).username
    conn = psycopg.connect(host=parts.host, port=int(parts.port or 5432), user=role,
                           dbname=parts.database, autocommit=True)
    conn.execute("SET default_transaction_read_only = off")
    return conn


#: What a psql session of a reader must not be able to do in the registry's database.
AS_PSQL = {
    "temp_table": "CREATE TEMP TABLE t (x int)",
    "temp_function": "CREATE FUNCTION pg_temp.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "large_object": "SELECT lo_creat(-1)",
    "large_object_create": "SELECT lo_create(0)",
    "large_object_bytes": "SELECT lo_from_bytea(0, 'x')",
    "table": "CREATE TABLE public.mine (x int)",
    "write": "DELETE FROM profile_sets",
    "server_file": "SELECT lo_import('/etc/hostname')",
}


@pytest.mark.parametrize("what", sorted(AS_PSQL))
def test_the_reader_cannot_write_through_psql(what, seeded, admin, reader):
    name, url = reader
    before = admin("SELECT count(*) FROM pg_largeobject_metadata")
    with _as(url, seeded) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(AS_PSQL[what])
        assert conn.execute("SELECT count(*) FROM acceptance_profiles").fetchone()[0] == 3
    assert admin("SELECT count(*) FROM pg_largeobject_metadata") == before


def test_db_reader_says_what_it_revoked_from_public(seeded, admin):
    name = _name("reader")
    admin(f'GRANT TEMPORARY ON DATABASE "{parse_url(seeded).database}" TO PUBLIC')
    try:
        result = run_cli("-d", seeded, "db", "reader", name)
        assert result.exit_code == 0, result.stderr
        assert "revoked from PUBLIC in this database" in result.stderr
        assert "TEMPORARY on the database" in result.stderr
        assert "warning" not in result.stderr
    finally:
        _drop(admin, name)


def test_db_reader_run_by_a_non_superuser_says_exactly_what_remains(empty_url, admin):
    """A role with CREATEROLE that owns the registry (it ran `db upgrade`) but not the
    database cannot revoke PUBLIC's defaults there: `db reader` says which remain and how a
    superuser removes them, and each one it names is one the reader has, and no other."""
    owner, name = _name("owner"), _name("reader")
    db = parse_url(empty_url).database
    admin(f'CREATE ROLE "{owner}" LOGIN CREATEROLE')
    admin(f'GRANT CREATE, USAGE ON SCHEMA public TO "{owner}"')
    admin(f'GRANT TEMPORARY ON DATABASE "{db}" TO PUBLIC')
    admin("GRANT EXECUTE ON FUNCTION lo_creat(integer), lo_create(oid), "
          "lo_from_bytea(oid, bytea) TO PUBLIC")
    owner_url = empty_url.replace("postgres@", f"{owner}@", 1)
    try:
        assert run_cli("-d", owner_url, "db", "upgrade").exit_code == 0
        result = run_cli("-d", owner_url, "db", "reader", name)
        assert result.exit_code == 0, result.stderr
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning")]
        said = {what: any(what in line for line in warnings)
                for what in ("TEMPORARY", "lo_creat", "CREATE on the registry's schema")}
        assert said == {"TEMPORARY": True, "lo_creat": True,
                        "CREATE on the registry's schema": False}, result.stderr
        assert f'REVOKE TEMPORARY ON DATABASE "{db}" FROM PUBLIC' in result.stderr
        with _as(result.stdout.strip(), empty_url) as conn:
            conn.execute("CREATE TEMP TABLE t (x int)")  # what it said remains, remains
            conn.execute("SELECT lo_unlink(lo_creat(-1))")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("CREATE TABLE public.mine (x int)")
    finally:
        _drop(admin, name, owner)
