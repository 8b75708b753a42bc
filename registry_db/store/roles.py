"""The PostgreSQL query boundary: which login roles may run an analyst's SQL, and making one.

On PostgreSQL a read-only transaction is no boundary for a superuser (``COPY ... TO PROGRAM``,
``pg_read_file``, ``set_config('role', ...)`` inside one SELECT) nor for a role that may write
the registry's tables (``SET TRANSACTION READ WRITE`` is one statement away in a function it
could create). The boundary is the login role itself: :func:`write_powers` lists, from the
catalog and before any of the analyst's SQL runs, every way the connection's login role (or a
role it may become) could change the registry or the server, and ``registry query`` runs only
when that list is empty. :func:`create_reader` makes a role for which it is: LOGIN, SELECT on the
registry's tables and views, EXECUTE on the registry layer's read-only functions, nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from registry_db.errors import RegistryError
from registry_db.store.engine import committed

# The catalog question a query's login role is asked, shared with the SQLAlchemy-free path.
from registry_db.store.role_powers import ATTRIBUTES as ATTRIBUTES
from registry_db.store.role_powers import POWERFUL_ROLES as POWERFUL_ROLES
from registry_db.store.role_powers import WRITE_POWERS_SQL as WRITE_POWERS_SQL
from registry_db.store.role_powers import Power as Power
from registry_db.store.role_powers import powers_of

#: The functions a reader is granted EXECUTE on (signatures as GRANT names them), those that
#: exist: ``registry_resolve`` as 0015 made it, or as 0011 did on a registry not upgraded yet.
RESOLVE_FUNCTIONS = ("registry_resolve(text, text, integer, text, text, text, text, text, "
                     "timestamptz, text[])", "registry_resolve_many(jsonb)",
                     "registry_resolve(text, text, integer, text, text, text, text, text, "
                     "timestamptz)")

_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")



def write_powers(conn: Connection) -> list[Power]:
    """Everything the session's login role could change, from the catalog (PostgreSQL only)."""
    rows = conn.execute(text(WRITE_POWERS_SQL), {"powerful": list(POWERFUL_ROLES)}).all()
    return powers_of([(role, what) for role, what in rows], login_role(conn))


def login_role(conn: Connection) -> str:
    """The session's login role."""
    return str(conn.execute(text("SELECT session_user")).scalar())


def check_role_name(name: str) -> str:
    """A role name ``create_reader`` accepts: lower-case letters, digits and ``_``, at most 63
    characters, not starting with a digit or ``pg_`` (reserved by PostgreSQL)."""
    if not _ROLE_NAME.fullmatch(name) or name.startswith("pg_"):
        raise RegistryError(f"{name!r} is not a role name registry_db creates: use lower-case "
                            "letters, digits and '_' (at most 63, not starting with a digit or "
                            "pg_), such as registry_reader")
    return name


#: What PUBLIC holds by default in a database that a reader does not need, revoked from PUBLIC
#: by ``create_reader``: (what it is called, the REVOKE, how to ask whether a role holds it).
PUBLIC_DEFAULTS = (
    ("TEMPORARY on the database (temporary tables and functions)",
     "REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC",
     "has_database_privilege(CAST(:r AS TEXT), current_database(), 'TEMPORARY')"),
    ("EXECUTE on lo_creat, lo_create and lo_from_bytea (new large objects, which outlive the "
     "session)",
     "REVOKE EXECUTE ON FUNCTION pg_catalog.lo_creat(integer), pg_catalog.lo_create(oid), "
     "pg_catalog.lo_from_bytea(oid, bytea) FROM PUBLIC",
     "has_function_privilege(CAST(:r AS TEXT), 'pg_catalog.lo_creat(integer)', 'EXECUTE') OR "
     "has_function_privilege(CAST(:r AS TEXT), 'pg_catalog.lo_create(oid)', 'EXECUTE') OR "
     "has_function_privilege(CAST(:r AS TEXT), 'pg_catalog.lo_from_bytea(oid, bytea)', "
     "'EXECUTE')"),
    ("CREATE on the registry's schema (tables of its own)",
     "REVOKE CREATE ON SCHEMA %I FROM PUBLIC",
     "has_schema_privilege(CAST(:r AS TEXT), CAST(:schema AS TEXT), 'CREATE')"),
)


@dataclass(frozen=True)
class Reader:
    """What :func:`create_reader` did: the defaults it took away from PUBLIC in the registry's
    database, and what the reader may still do beyond SELECT there (each with how to remove
    it), which only the database's owner or a superuser can take away."""

    revoked: tuple[str, ...]
    remains: tuple[str, ...]


def create_reader(engine: Engine, name: str, password: str | None = None) -> Reader:
    """Create (or bring back to) a LOGIN role that may SELECT the registry's tables and views
    and nothing else; idempotent. Run as a role that may create roles and grant on the schema.

    Later migrations' tables are readable too (default privileges of the role running this).
    What PUBLIC holds in the database that a reader does not need (:data:`PUBLIC_DEFAULTS`) is
    revoked from PUBLIC where this role may; what remains is returned.
    Raises :class:`RegistryError` when a role of that name exists and may write: it is not made
    a reader by taking privileges away from it.
    """
    check_role_name(name)
    with engine.connect() as conn, committed(conn):
        schema = conn.execute(text(
            "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = to_regclass('profile_sets')")).scalar()
        if schema is None:
            raise RegistryError("the database holds no registry yet: run `registry db upgrade` "
                                "(or import a set) first, then create the reader")
        exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :n"),
                              {"n": name}).scalar()
        attributes = " ".join(f"NO{sql}" for _, sql, _ in ATTRIBUTES)
        statements = [
            (f"{'ALTER' if exists else 'CREATE'} ROLE %I LOGIN {attributes}", (name,)),
            ("ALTER ROLE %I SET default_transaction_read_only = on", (name,)),
            ("GRANT CONNECT ON DATABASE %I TO %I", ("$db", name)),
            ("GRANT USAGE ON SCHEMA %I TO %I", (schema, name)),
            ("GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I", (schema, name)),
            ("ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO %I",
             (schema, name)),
        ]
        # The registry layer's functions (migration 0011), by name: PUBLIC may run them too,
        # and they read only what their caller may (SECURITY INVOKER).
        for signature in RESOLVE_FUNCTIONS:
            if conn.execute(text("SELECT to_regprocedure(quote_ident(:s) || '.' || :f) "
                                 "IS NOT NULL"), {"s": schema, "f": signature}).scalar():
                statements.append((f"GRANT EXECUTE ON FUNCTION %I.{signature} TO %I",
                                   (schema, name)))
        if password is not None:
            statements.append(("ALTER ROLE %I PASSWORD %L", (name, password)))
        for template, args in statements:
            _run_formatted(conn, template, args)
        revoked: list[str] = []
        remains: list[str] = []
        for what, revoke, holds in PUBLIC_DEFAULTS:
            public_had = conn.execute(text(f"SELECT {holds}"),
                                      {"r": "public", "schema": schema}).scalar()
            # A role that may not revoke it gets a warning from the server, not an error.
            _run_formatted(conn, revoke, ("$db",) if "DATABASE" in revoke else
                           (schema,) if "%I" in revoke else ())
            if conn.execute(text(f"SELECT {holds}"), {"r": name, "schema": schema}).scalar():
                remains.append(f"{what}: {_by_hand(revoke, conn, schema)}")
            elif public_had:
                revoked.append(what)
        if _role_may_write(conn, name):
            raise RegistryError(
                f"the role {name} exists and may write the registry (or the server); "
                "a reader is a role of its own: choose another name")
        if conn.execute(text("SELECT current_setting('lo_compat_privileges') = 'on'")).scalar():
            remains.append("every large object, to read, write and unlink "
                           "(lo_compat_privileges is on: a superuser turns it off)")
    return Reader(tuple(revoked), tuple(remains))


def _by_hand(revoke: str, conn: Connection, schema: str) -> str:
    """The REVOKE as a database's owner or a superuser would run it."""
    database = str(conn.execute(text("SELECT current_database()")).scalar())
    return ("only the database's owner or a superuser can take it away: "
            + revoke.replace("DATABASE %I", f'DATABASE "{database}"')
            .replace("SCHEMA %I", f'SCHEMA "{schema}"'))


def _run_formatted(conn: Connection, template: str, args: tuple[str, ...]) -> None:
    # The server quotes names (%I) and the password (%L): nothing is spliced in here.
    params: dict[str, str] = {"t": template}
    if not args:
        conn.exec_driver_sql(template)
        return
    slots = []
    for i, arg in enumerate(args):
        if arg == "$db":
            slots.append("current_database()")
        else:
            params[f"a{i}"] = arg
            slots.append(f"CAST(:a{i} AS TEXT)")
    statement = str(conn.execute(text(f"SELECT format(CAST(:t AS TEXT), {', '.join(slots)})"),
                                 params).scalar())
    conn.exec_driver_sql(statement)


def _role_may_write(conn: Connection, name: str) -> bool:
    """Whether ``name`` (or a role it belongs to) could write, as :func:`write_powers` sees it
    for a login role."""
    sql = WRITE_POWERS_SQL.replace("session_user", ":role")
    return bool(conn.execute(text(sql), {"role": name,
                                         "powerful": list(POWERFUL_ROLES)}).first())


def reader_url(url: str, name: str) -> str:
    """``url`` with its user replaced by ``name`` and no password (libpq reads it from
    PGPASSWORD or ~/.pgpass; a URL with a password in it ends up in shell histories)."""
    scheme, rest = url.split("://", 1)
    authority, slash, path = rest.partition("/")
    host = authority.rsplit("@", 1)[-1]
    return f"postgresql://{name}@{host}{slash}{path}"
