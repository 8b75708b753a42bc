"""What many tests share: one way to run the command line, one way to write a set, and the
database checks (a full dump of every table, broken foreign keys, orphaned provenances).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Engine

from registry_db import store
from registry_db.cli.group import main
from registry_db.store.schema import metadata
from tests.conftest import ROOT, SEED

SEED_FILE = SEED / "inferencex-golden-al.yaml"


@contextlib.contextmanager
def migrated_to(url: str, revision: str) -> Iterator[Engine]:
    """An engine on the empty database ``url`` brought to ``revision`` (not the head), for data
    migration tests: write rows as that revision held them, then upgrade and check."""
    engine = store.make_engine(url)
    try:
        store.upgrade(engine, revision)
        yield engine
    finally:
        engine.dispose()


def _drop_file_capabilities() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def as_user(*args: str, cwd=None, env: dict[str, str] | None = None, input: str | None = None,
            ) -> subprocess.CompletedProcess:
    """``registry ARGS`` in a subprocess that file modes bind: as root (CI containers) it drops
    the capabilities that bypass them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a mode means
    for it what it means for any user. ``env`` adds to an environment without REGISTRY_*."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    return subprocess.run([sys.executable, "-m", "registry_db", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, env={**base, **(env or {})}, timeout=120,
                          input=input,
                          preexec_fn=_drop_file_capabilities if os.geteuid() == 0 else None)


def run_cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """``registry ARGS`` in process, stdout and stderr apart. No expected failure may show a
    traceback, and an unexpected exception is raised here rather than read as an exit code."""
    result = CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result



def set_yaml(name: str, n: int = 3, *, al: float = 2.5, model: str = "model-a",
             source: str = "https://example.org/run.yaml", caveats: tuple[str, ...] = ("c1",),
             first_category: int = 0) -> str:
    """A valid set of ``n`` measured profiles (categories cat<i>) sharing one provenance."""
    lines = ["kind: AcceptanceProfileSet", f"name: {name}"]
    if caveats:
        lines.append("caveats:")
        lines += [f"  - {c}" for c in caveats]
    lines.append("profiles:")
    for i in range(n):
        lines += [
            f"  - model: {model}", "    speculative_method: mtp", "    num_spec_tokens: 3",
            '    thinking: "on"', f"    category: cat{first_category + i}",
            f"    acceptance_length: {al}", "    method: measured",
        ]
        if i == 0:
            lines += [
                "    provenance: &p",
                f"      source: {source}", "      hardware: b300", "      engine_image: img:1",
                "      sampling: {temperature: 0.0}",
                "      settings: {rejection_sample_method: block, seed: 7}",
            ]
        else:
            lines.append("    provenance: *p")
    return "\n".join(lines) + "\n"


def write_set(folder: Path, name: str, n: int = 3, **kw) -> Path:
    """Write :func:`set_yaml` to ``folder/<name>.yaml``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(set_yaml(name, n, **kw), encoding="utf-8")
    return path


#: Tables that are caches, not the registry's content: ``import_files`` remembers what files
#: held (store/unchanged.py), so another file, a downgrade or a truncation forgets it.
CACHES = ("import_files",)


def dump(engine, *, skip: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
    """Every table's rows ordered by primary key (``table.column`` names in ``skip`` omitted),
    caches (:data:`CACHES`) left out."""
    out = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            if table.name in CACHES:
                continue
            cols = [c for c in table.columns if f"{table.name}.{c.name}" not in skip]
            order = list(table.primary_key.columns) or cols
            out[table.name] = [tuple(r) for r in conn.execute(select(*cols).order_by(*order))]
    return out


#: Child column -> parent column, for the orphan check.
_FOREIGN_KEYS = [
    ("set_caveats", "set_id", "profile_sets", "id"),
    ("profiles", "set_id", "profile_sets", "id"),
    ("profiles", "provenance_id", "provenances", "id"),
    ("profiles", "method", "methods", "name"),
    ("profile_rates", "profile_id", "profiles", "id"),
    ("provenance_settings", "provenance_id", "provenances", "id"),
    ("revision_caveats", "revision_id", "revisions", "id"),
    ("revision_profiles", "revision_id", "revisions", "id"),
    ("revision_profiles", "provenance_id", "provenances", "id"),
    ("revision_rates", "profile_id", "revision_profiles", "id"),
    ("profile_counts", "profile_id", "profiles", "id"),
    ("revision_counts", "profile_id", "revision_profiles", "id"),
]


def broken_foreign_keys(engine) -> list[tuple]:
    """Rows whose parent is missing: SQLite's own check, plus orphan joins on both backends."""
    found: list[tuple] = []
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            found += [tuple(r) for r in conn.exec_driver_sql("PRAGMA foreign_key_check")]
        present = set(inspect(conn).get_table_names())
        for child, col, parent, pcol in _FOREIGN_KEYS:
            if child not in present:  # an older schema revision (migration tests)
                continue
            n = conn.execute(text(
                f"SELECT COUNT(*) FROM {child} c LEFT JOIN {parent} p ON p.{pcol} = c.{col} "
                f"WHERE c.{col} IS NOT NULL AND p.{pcol} IS NULL")).scalar()
            if n:
                found.append((child, col, n))
    return found


def orphan_provenances(engine) -> int:
    """Provenances that neither a profile nor a revision's profile cites."""
    with engine.connect() as conn:
        return conn.execute(text(
            "SELECT COUNT(*) FROM provenances pr WHERE NOT EXISTS "
            "(SELECT 1 FROM profiles p WHERE p.provenance_id = pr.id) AND NOT EXISTS "
            "(SELECT 1 FROM revision_profiles p WHERE p.provenance_id = pr.id)")).scalar()


@contextlib.contextmanager
def reader_role(admin_url: str) -> Iterator[str]:
    """A PostgreSQL reader role for ``registry query`` on the registry at ``admin_url`` (made by
    the library's :func:`registry_db.store.roles.create_reader`), its URL; dropped afterwards."""
    import os
    import uuid

    from registry_db.store import roles

    name = f"registry_reader_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    engine = store.make_engine(admin_url)
    try:
        roles.create_reader(engine, name)
        yield roles.reader_url(admin_url, name)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP OWNED BY "{name}"'))
            conn.execute(text(f'DROP ROLE "{name}"'))
            conn.commit()
        engine.dispose()


def run_in_terminal(*args: str, env: dict[str, str] | None = None, columns: int = 80,
                    stdout_tty: bool = True, stderr_tty: bool = False,
                    timeout: float = 120) -> tuple[int, str, str]:
    """``python -m registry_db ARGS`` as a real process whose stdout and/or stderr is a terminal
    (a pseudo-terminal ``columns`` wide, ``COLUMNS`` set to match), the other a pipe.

    Returns the exit code, stdout and stderr, a terminal's ``\\r\\n`` read back as ``\\n``.
    """
    import fcntl
    import os
    import selectors
    import struct
    import subprocess
    import sys
    import termios

    streams, parent_ends, child_ends = {}, [], []
    for name, tty in (("stdout", stdout_tty), ("stderr", stderr_tty)):
        if tty:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        else:
            master, slave = os.pipe()
        streams[name] = (master, slave)
        parent_ends.append(master)
        child_ends.append(slave)
    full_env = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "registry_db", *args],
                            stdin=subprocess.DEVNULL, stdout=streams["stdout"][1],
                            stderr=streams["stderr"][1], env=full_env)
    for fd in child_ends:
        os.close(fd)
    chunks: dict[int, list[bytes]] = {fd: [] for fd in parent_ends}
    with selectors.DefaultSelector() as sel:
        for fd in parent_ends:
            sel.register(fd, selectors.EVENT_READ)
        open_fds = set(parent_ends)
        while open_fds:
            events = sel.select(timeout)
            if not events:
                proc.kill()
                raise AssertionError(f"registry {' '.join(args)} did not finish")
            for key, _ in events:
                try:
                    data = os.read(key.fd, 65536)
                except OSError:  # EIO: the terminal's other end is closed
                    data = b""
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    open_fds.discard(key.fd)
    code = proc.wait(timeout)
    for fd in parent_ends:
        os.close(fd)

    def text(name: str) -> str:
        raw = b"".join(chunks[streams[name][0]]).decode("utf-8", "replace")
        return raw.replace("\r\n", "\n")

    return code, text("stdout"), text("stderr")
