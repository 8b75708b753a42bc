"""Alembic environment for registry_db.

By the book (alembic's generic template), with four additions: the connection may be handed
in through ``config.attributes["connection"]`` (that is how ``registry db`` runs it); SQLite
migrates in batch mode with foreign keys off and checked afterwards, inside a real transaction
so that a failing migration rolls its DDL back; PostgreSQL takes the registry's writer lock
so that two processes never migrate at once; a downgrade asks each migration it undoes what
its ``would_lose(connection)`` reports, refusing before the commit unless forced; and an
upgrade runs ``config.attributes["before_upgrade"]`` first, in its transaction.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context

from registry_db.store.engine import make_engine
from registry_db.store.migrate import run_migrations_on
from registry_db.store.schema import metadata
from registry_db.store.urls import resolve_url

config = context.config

# `alembic ...` from the checkout logs as alembic.ini says; `registry db` has no ini file.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    return resolve_url(config.get_main_option("sqlalchemy.url") or None)


def run_migrations_offline() -> None:
    """Print the SQL (``--sql``) without a database."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against the handed-in connection, or one made from the URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        run_migrations_on(connection, _configure_and_run)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            run_migrations_on(connection, _configure_and_run)
    finally:
        engine.dispose()


def _configure_and_run(connection) -> None:
    # A downgrade asks each migration it undoes what it would lose (store.migrate.LossCheck).
    check = config.attributes.get("loss_check")
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        transactional_ddl=True,
        compare_type=True,
        on_version_apply=check.step_applied if check is not None else (),
    )
    # An upgrade first puts a legacy history's times into revision order (store.revision_order).
    before_upgrade = config.attributes.get("before_upgrade")
    with context.begin_transaction():
        if check is not None:
            check.ask_next(connection)
        elif before_upgrade is not None:
            before_upgrade(connection)
        context.run_migrations()
        if check is not None:
            check.finish()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
