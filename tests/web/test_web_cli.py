"""``registry serve`` before any server starts: the metadata it prints, the registries it
refuses and why, and what it imports."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from registry_db.analyze import web
from registry_db.store import catalog
from tests.helpers import run_cli


@pytest.fixture(autouse=True)
def no_server(monkeypatch):
    """A test here that reached the server would wait forever: it fails at once instead."""
    from registry_db.analyze import web_plugin

    def refuse(*_args, **_kwargs):
        raise AssertionError("registry serve went on to start a server")

    monkeypatch.setattr(web_plugin, "serve", refuse)


def test_metadata_prints_every_description_of_the_catalog(registry_file):
    result = run_cli("-d", str(registry_file), "serve", "--metadata")
    assert result.exit_code == 0, result.stderr
    meta = json.loads(result.stdout)
    assert meta == web.metadata(registry_file.stem)
    assert meta["title"] == web.TITLE
    (name,) = meta["databases"]
    assert name == registry_file.stem
    pages = meta["databases"][name]["tables"]
    # The same words as PostgreSQL's comments (and docs/schema.md): the catalog's.
    assert {n: (p["description"], p["columns"]) for n, p in pages.items()} == {
        n: (words, columns) for n, (_kind, words, columns) in catalog.comments().items()}


def test_metadata_facets_and_orders_name_real_columns():
    pages = web.metadata("registry")["databases"]["registry"]["tables"]
    for name, page in web.PAGES.items():
        columns = catalog.RELATIONS[name].column_names
        assert set(page.facets) <= set(columns), name
        assert page.sort in columns, name
        shown = pages[name]
        assert shown.get("facets", []) == list(page.facets)
        assert shown["sort_desc" if page.descending else "sort"] == page.sort
    assert {n for n, p in pages.items() if p.get("hidden")} == set(catalog.TABLES)
    assert set(web.PAGES["acceptance_profiles"].facets) >= {
        "model", "speculative_method", "thinking", "category", "method"}


def test_metadata_holds_the_canned_queries_and_their_forms():
    queries = web.metadata("registry")["databases"]["registry"]["queries"]
    assert queries["resolve"]["title"] == "Resolve a run"
    assert queries["resolve"]["params"] == list(web.RESOLVE_PARAMETERS)
    assert queries["resolve"]["sql"] == web.resolve_sql()
    assert queries["coverage"]["params"] == ["model", "method"]
    assert queries["set_history"]["params"] == ["set"]
    assert "params" not in queries["conflicts"]
    # "Values with their uncertainty" reads the counts columns, with them.
    counts = "al_stderr" in catalog.VIEWS["acceptance_profiles"].column_names
    assert ("uncertainty" in queries) is counts


def test_every_canned_query_runs_on_the_registry(registry_file):
    conn = sqlite3.connect(f"file:{registry_file}?mode=ro", uri=True)
    try:
        for query in web.canned_queries():
            conn.execute(query.sql, dict.fromkeys(query.params, "")).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("url", ["postgresql://analyst@db.invalid/registry",
                                 "postgres://analyst@db.invalid/registry"])
def test_a_postgresql_registry_is_named_by_its_database(url):
    """Served from SQLite copies: the metadata names the database, without connecting."""
    result = run_cli("-d", url, "serve", "--metadata")
    assert result.exit_code == 0, result.stderr
    assert list(json.loads(result.stdout)["databases"]) == ["registry"]


def test_an_unreachable_postgresql_registry_is_exit_3():
    result = run_cli("-d", "postgresql://analyst@db.invalid/registry", "serve")
    assert result.exit_code == 3
    assert "Traceback" not in result.stderr


def test_a_url_that_is_neither_is_a_usage_error():
    result = run_cli("-d", "mysql://analyst@db.invalid/registry", "serve")
    assert result.exit_code == 2
    assert "SQLite file or a PostgreSQL URL" in result.stderr


def test_a_missing_file_is_exit_3_and_is_not_created(tmp_path):
    path = tmp_path / "nowhere.db"
    result = run_cli("-d", str(path), "serve")
    assert result.exit_code == 3
    assert "no registry at" in result.stderr
    assert not path.exists()


def test_an_old_schema_is_exit_3(registry_file, tmp_path):
    old = tmp_path / "old.db"
    old.write_bytes(registry_file.read_bytes())
    assert run_cli("-d", str(old), "db", "downgrade", "0005").exit_code == 0
    result = run_cli("-d", str(old), "serve")
    assert result.exit_code == 3
    assert "registry db upgrade" in result.stderr


def test_changes_a_writer_has_not_checkpointed_are_served(registry_file, tmp_path):
    """A commit still in the -wal is part of the registry: the snapshot the pages read holds
    it (an immutable open of the file alone would not)."""
    from registry_db.analyze.web_snapshot import Snapshots

    busy = tmp_path / "busy.db"
    busy.write_bytes(registry_file.read_bytes())
    writer = sqlite3.connect(busy)
    snapshots = Snapshots(str(busy))
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("UPDATE profile_sets SET source_file = source_file || '.moved'")
        writer.commit()
        assert (tmp_path / "busy.db-wal").stat().st_size > 0
        copy = sqlite3.connect(snapshots.current().path)
        try:
            moved = copy.execute("SELECT COUNT(*) FROM profile_sets WHERE source_file "
                                 "LIKE '%.moved'").fetchone()[0]
        finally:
            copy.close()
    finally:
        writer.close()
        snapshots.close()
    assert moved == 3


def test_without_datasette_it_names_the_extra(registry_file, monkeypatch):
    import registry_db.analyze

    monkeypatch.setitem(sys.modules, "datasette", None)  # import datasette: ImportError
    monkeypatch.delitem(sys.modules, "registry_db.analyze.web_plugin")
    monkeypatch.delattr(registry_db.analyze, "web_plugin")
    result = run_cli("-d", str(registry_file), "serve")
    assert result.exit_code == 1
    assert "pip install 'registry_db[web]'" in result.stderr
    assert "registry serve needs Datasette, which is not installed" in result.stderr


def test_without_matplotlib_it_names_matplotlib(registry_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    result = run_cli("-d", str(registry_file), "serve")
    assert result.exit_code == 1
    assert "registry serve needs matplotlib (its pictures), which is not installed" in \
        result.stderr
    assert "Datasette" not in result.stderr
    assert "pip install 'registry_db[web]'" in result.stderr


def test_serve_imports_datasette_only_to_serve(registry_file):
    """``registry serve --metadata`` (and the command table) never import Datasette,
    uvicorn, matplotlib or SQLAlchemy."""
    code = ("import sys\nfrom registry_db.cli.group import main\n"
            "try:\n    main(['-d', sys.argv[1], 'serve', '--metadata'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "heavy = [m for m in ('datasette', 'uvicorn', 'matplotlib', 'sqlalchemy')\n"
            "         if m in sys.modules]\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, str(registry_file)], capture_output=True,
                          text=True, timeout=120, check=True)
    assert "HEAVY []" in done.stderr
    assert json.loads(done.stdout)["title"] == web.TITLE


def test_help_ends_with_an_example():
    result = run_cli("serve", "--help")
    assert result.exit_code == 0
    assert "Example:" in result.output and "registry serve --metadata" in result.output
    assert "127.0.0.1" in result.output
