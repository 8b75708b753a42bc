"""What a PostgreSQL login role could change beyond reading: the catalog question
``registry query`` asks before it runs an analyst's SQL (:mod:`registry_db.store.roles` on an
engine, :mod:`registry_db.store.pg_query` on the command line's psycopg connection), without
SQLAlchemy."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ATTRIBUTES", "POWERFUL_ROLES", "Power", "WRITE_POWERS_SQL", "powers_of"]

#: Predefined roles whose members act beyond reading the registry, outside any transaction or
#: on the whole server: read or write server files, run programs, signal other sessions (or
#: autovacuum), write every table, checkpoint, subscribe to other servers, vacuum and lock
#: every table (PostgreSQL 11 to 18; absent ones are simply not matched).
POWERFUL_ROLES = ("pg_write_server_files", "pg_execute_server_program", "pg_read_server_files",
                  "pg_signal_backend", "pg_write_all_data", "pg_checkpoint",
                  "pg_create_subscription", "pg_maintain", "pg_signal_autovacuum_worker")

#: Role attributes beyond reading, as the refusal names them (the catalog's column, the
#: attribute's SQL name, what it lets a role do whatever the transaction).
ATTRIBUTES = (
    ("rolsuper", "SUPERUSER", "is a superuser"),
    ("rolcreaterole", "CREATEROLE", "may create roles (and so grant itself any role)"),
    ("rolreplication", "REPLICATION",
     "may replicate (REPLICATION: create replication slots, which outlive any transaction and "
     "hold WAL)"),
    ("rolbypassrls", "BYPASSRLS", "bypasses row-level security (BYPASSRLS)"),
    ("rolcreatedb", "CREATEDB", "may create databases (CREATEDB)"),
)

#: Every role the session's login role is a member of (itself included, with or without
#: INHERIT: a member may SET ROLE, even inside one SELECT through set_config).
_MEMBERS = """
WITH member AS (
    SELECT r.* FROM pg_roles r
    WHERE pg_has_role(session_user, r.oid, 'MEMBER')
), registry AS (
    SELECT c.oid, c.relname, c.relkind, c.relnamespace FROM pg_class c
    WHERE c.relnamespace = (SELECT relnamespace FROM pg_class
                            WHERE oid = to_regclass('profile_sets'))
      AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
)
"""

#: One row per power: (role, what it may do). Empty: the role only reads.
WRITE_POWERS_SQL = _MEMBERS + """
SELECT rolname, what FROM (
""" + "UNION ALL\n".join(
    f"SELECT {rank} AS rank, rolname, '{what}' AS what FROM member WHERE {column}\n"
    for rank, (column, _, what) in enumerate(ATTRIBUTES, 1)) + """UNION ALL
SELECT 10, CAST(session_user AS name), 'is a member of ' || m.rolname FROM member m
WHERE m.rolname = ANY(:powerful)
UNION ALL
SELECT 11, m.rolname, 'may create schemas in the database (CREATE on it)' FROM member m
WHERE has_database_privilege(m.oid, current_database(), 'CREATE')
UNION ALL
SELECT 12, m.rolname, 'may write ' || t.relname FROM member m CROSS JOIN registry t
WHERE t.relkind <> 'S' AND (
    has_table_privilege(m.oid, t.oid, 'INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER, REFERENCES')
    OR has_any_column_privilege(m.oid, t.oid, 'INSERT, UPDATE, REFERENCES'))
UNION ALL
SELECT 13, m.rolname, 'may change the sequence ' || t.relname FROM member m
CROSS JOIN registry t
WHERE t.relkind = 'S' AND has_sequence_privilege(m.oid, t.oid, 'UPDATE')
UNION ALL
SELECT 14, m.rolname, 'may create objects in the schema ' || n.nspname FROM member m
JOIN pg_namespace n ON n.oid = (SELECT relnamespace FROM pg_class
                                WHERE oid = to_regclass('profile_sets'))
WHERE has_schema_privilege(m.oid, n.oid, 'CREATE')
UNION ALL
SELECT 15, m.rolname, CASE WHEN f.prosecdef
    THEN 'may run ' || f.oid::regprocedure::text || ', a SECURITY DEFINER function of '
         || pg_get_userbyid(f.proowner) || ' (it runs with that role''s privileges)'
    ELSE 'may run ' || f.oid::regprocedure::text || ', which PostgreSQL keeps from PUBLIC'
    END
FROM member m CROSS JOIN pg_proc f
WHERE (f.prosecdef OR (f.proacl IS NOT NULL AND NOT EXISTS (
          -- PUBLIC may run it, or a predefined role may (PostgreSQL's monitoring grants):
          -- either way, no power of this role's own
          SELECT 1 FROM aclexplode(f.proacl) a LEFT JOIN pg_roles g ON g.oid = a.grantee
          WHERE a.privilege_type = 'EXECUTE' AND (a.grantee = 0 OR g.rolname LIKE 'pg\\_%'))))
  AND f.proowner <> m.oid AND has_function_privilege(m.oid, f.oid, 'EXECUTE')
) AS powers
ORDER BY rank, rolname, what
"""


@dataclass(frozen=True)
class Power:
    """One thing a role could do beyond reading: which role (the login role or one it may
    become) and what."""

    role: str
    what: str

    def __str__(self) -> str:
        return f"{self.role} {self.what}"


def powers_of(rows: list[tuple[str, str]], login: str) -> list[Power]:
    """The powers the catalog's ``rows`` (:data:`WRITE_POWERS_SQL`) name for ``login``."""
    powers = [Power(role, what) for role, what in rows]
    if Power(login, "is a superuser") in powers:
        # A superuser is a member of every role: the rest would only repeat it.
        return [Power(login, "is a superuser")]
    return powers
