"""The writers' advisory lock held by someone else: the import's exit-3 message names them.

Any role may take an advisory lock, a reader's `registry query` included, so a query can make
imports wait until their wait runs out. The message then says which backend holds the lock.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.store.engine import WRITE_LOCK_KEY
from tests.helpers import SEED, TEST_PREFIX, reader_role, run_cli

pytestmark = pytest.mark.only_backend("postgresql")


def test_import_names_the_backend_holding_the_writers_lock(backend, db_url):
    with reader_role(db_url) as url:
        holder = store.make_engine(url)
        try:
            with holder.connect() as conn:
                pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
                result = run_cli("-d", db_url, "import", str(SEED),
                                 env={"REGISTRY_LOCK_TIMEOUT": "0.5"})
                conn.rollback()
        finally:
            holder.dispose()
    assert result.exit_code == 3, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert f"held by backend {pid}" in line and f"role {TEST_PREFIX}registry_reader_" in line
    assert f"pg_terminate_backend({pid})" in line
