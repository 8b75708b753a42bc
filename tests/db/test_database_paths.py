"""What a command does beside the registry's file, and how it names the database: a read
leaves no ``-wal`` or ``-shm`` beside an SQLite file (while another connection holds the file
they stay: SQLite's own rule), a folder given as ``-d`` is named as a folder, and messages print
a PostgreSQL URL as typed, not with the driver the registry adds."""

from __future__ import annotations

import sqlite3

import pytest

from registry_db.store.urls import shown_url
from tests.helpers import SEED, run_cli

READS = [("list",), ("profiles",), ("history",), ("conflicts",), ("coverage",),
         ("show", "inferencex-golden-al"), ("export", "-o", "-"), ("query", "SELECT 1"),
         ("resolve", "--model", "deepseek-v4.1-flash", "--method", "dspark", "--k", "5",
          "--thinking", "off", "--category", "coding"),
         ("check", "--batch", "-"), ("db", "current")]


@pytest.fixture(scope="module")
def registry_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("reg") / "registry.db"
    assert run_cli("-d", path, "import", SEED).exit_code == 0
    return path


def beside(path):
    return sorted(p.name for p in path.parent.iterdir())


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_leaves_no_files_beside_the_registry(registry_file, args):
    assert beside(registry_file) == ["registry.db"]
    result = run_cli("-d", registry_file, *args, input="")
    assert result.exit_code in (0, 1), result.stderr
    assert beside(registry_file) == ["registry.db"]


def test_while_another_connection_holds_the_file_its_wal_stays(registry_file):
    other = sqlite3.connect(registry_file)
    try:
        other.execute("SELECT count(*) FROM profiles").fetchall()  # a reader of the WAL file
        assert run_cli("-d", registry_file, "list").exit_code == 0
        assert "registry.db-shm" in beside(registry_file)
        assert other.execute("SELECT count(*) FROM profiles").fetchone()[0] == 3
    finally:
        other.close()
    assert beside(registry_file) == ["registry.db"]  # the last connection's close, SQLite's


def test_a_folder_as_the_database_is_named_a_folder(tmp_path):
    for args in (("list",), ("import", str(SEED))):
        result = run_cli("-d", tmp_path, *args)
        assert result.exit_code == 2
        assert f"{tmp_path} is a folder; the registry is a file in it, such as -d " \
               f"{tmp_path / 'registry.db'}, or a database URL" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("typed", ["postgresql://bob:s3cr3t@127.0.0.1:1/x",
                                   "postgres://bob:s3cr3t@127.0.0.1:1/x"])
def test_messages_print_the_url_without_the_driver(typed):
    result = run_cli("-d", typed, "list")
    assert result.exit_code == 3
    assert "cannot reach the database (postgresql://bob:***@127.0.0.1:1/x)" in result.stderr
    assert "psycopg://" not in result.stderr and "s3cr3t" not in result.stderr


def test_shown_url_drops_only_the_driver_it_adds():
    assert shown_url("postgresql+psycopg://u:p@h/db") == "postgresql://u:***@h/db"
    assert shown_url("sqlite:///a.db") == "sqlite:///a.db"
    assert shown_url("mysql+pymysql://u@h/db") == "mysql+pymysql://u@h/db"
