"""The benchmarks' ``Backend.fresh()`` hands out an empty registry even after an import (a
table it left full made the next import's keys collide on PostgreSQL)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from registry_db.importing.write import import_paths
from registry_db.store import make_engine

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import generate  # noqa: E402
from backends import Backend  # noqa: E402

#: Filled by the migrations, not by an import.
SEEDED = {"alembic_version", "methods"}


def _filled(url: str) -> dict[str, int]:
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            names = set(inspect(conn).get_table_names()) - SEEDED
            counts = {t: conn.execute(text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one()
                      for t in sorted(names)}
    finally:
        eng.dispose()
    return {t: n for t, n in counts.items() if n}


def _import(url: str, folder: Path) -> None:
    engine = make_engine(url)
    try:
        import_paths(engine, [folder])
    finally:
        engine.dispose()


@pytest.fixture
def bench_folder(backend, tmp_path, request):
    """A benchmark ``Backend`` of this test's backend and a small generated registry folder."""
    admin = request.getfixturevalue("pg_server").admin_url if backend == "postgresql" else None
    folder = tmp_path / "reg"
    generate.write_registry(generate.default_layout(400, 2), folder)
    bench = Backend(backend, tmp_path, admin)
    try:
        yield bench, folder
    finally:
        bench.close()


def test_fresh_after_an_import_is_empty(bench_folder):
    """Every table an import writes is empty again in the next ``fresh()``, and that registry
    takes the same import again."""
    bench, folder = bench_folder
    url = bench.fresh()
    _import(url, folder)
    assert "profile_keys" in _filled(url)
    again = bench.fresh()
    assert _filled(again) == {}
    _import(again, folder)


def test_the_floor_writes_every_table_an_import_writes_either_way(bench_folder):
    """The import's floor (``baselines.write_rows``) fills the same tables with as many rows as
    the import, whether it sends the history tables or copies them in the database."""
    import baselines

    bench, folder = bench_folder
    url = bench.fresh()
    _import(url, folder)
    imported = _filled(url)
    rows = baselines.build_rows(sorted(folder.glob("*.yaml")))
    for way in baselines.HISTORY_WAYS:
        floor = bench.fresh()
        baselines.write_rows(floor, rows, way)
        assert _filled(floor) == imported, way
