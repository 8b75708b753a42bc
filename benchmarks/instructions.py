"""The import against its floor in instructions executed, where CPU time is too noisy to tell.

    python benchmarks/instructions.py [--profiles 2000] [--files 4] [--source DIR ...]

Under ``valgrind --tool=callgrind``, which counts the instructions a process executes (the same
count from run to run, whatever else the machine does), for the floor (``baselines.py``'s:
libyaml's events, then the bulk write into every table an import writes) and for
``import_paths`` of each source tree (this checkout's code by default; each ``--source`` is
another checkout's folder, whose ``registry_db`` is put first on ``sys.path``): a process that
sets up and runs the step, less one that only sets up (interpreter, imports, an open database,
the floor's rows loaded), with ``PYTHONHASHSEED=0``. Prints one JSON object: each step's
instructions, ours ÷ the floor per tree, and each tree against the first.

Instructions are not time: a cache miss or a system call costs more than its count says, and
SQLite's file writes count only as the CPU work around them. Use it to compare two trees, or
to see the Python work against the floor's, when the machine's own noise (on a shared virtual
machine, CPU steal) is larger than the change; each process runs about 50 times slower.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def collected(stderr: str) -> int:
    """The instruction count callgrind prints on exit (``==PID== Collected : N``)."""
    found = _COLLECTED.findall(stderr)
    if not found:
        raise RuntimeError(f"no callgrind count in: {stderr[-500:]}")
    return int(found[-1])


def _child(kind: str, url: str, folder: str, rows: str, run: bool) -> None:
    """One measured process: set up ``kind`` (``floor`` or ``ours``) and, with ``run``, run it."""
    sys.path.insert(0, str(HERE))
    paths = sorted(Path(folder).glob("*.yaml"))
    if kind == "floor":
        import marshal

        import baselines

        data = marshal.loads(Path(rows).read_bytes())
        if run:
            baselines.parse_events(paths)
            baselines.write_rows(url, data)
        return
    import registry_db.sources.profile_set  # noqa: F401  (set-up: loaded either way)
    import registry_db.store.history  # noqa: F401
    from registry_db import store
    from registry_db.gcpause import gc_paused
    from registry_db.store.write import import_paths

    engine = store.open_registry(url)
    try:
        with gc_paused():  # as `registry import` runs it
            if run:
                import_paths(engine, [Path(folder)])
    finally:
        engine.dispose()


def count(kind: str, source: Path | None, template: Path, folder: Path, rows: Path,
          run: bool, work: Path) -> int:
    """Instructions of one child process (a fresh copy of ``template`` as its database)."""
    db = work / "measured.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, db)
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
           *_child_command(kind, db, folder, rows, run)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(source),
                          cwd=str(source or HERE.parent))
    if done.returncode != 0:
        raise RuntimeError(f"{kind} failed ({done.returncode}): {done.stderr[-2000:]}")
    return collected(done.stderr)


def warm_up(kind: str, source: Path | None, template: Path, folder: Path, rows: Path,
            work: Path) -> None:
    """One run outside valgrind, so that every module's bytecode is cached before counting."""
    db = work / "warm-up.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, db)
    subprocess.run(_child_command(kind, db, folder, rows, True), check=True,
                   env=_env(source), cwd=str(source or HERE.parent), capture_output=True)


def _child_command(kind: str, db: Path, folder: Path, rows: Path, run: bool) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", kind, f"sqlite:///{db}",
            str(folder), str(rows), "1" if run else "0"]


def _env(source: Path | None) -> dict[str, str]:
    """As an installed program runs (bytecode cached, which the warm-up writes), the same hash
    seed every run, ``source``'s package first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONHASHSEED"] = "0"
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source),
                                                          env.get("PYTHONPATH", "")]))
    return env


def step(kind: str, source: Path | None, template: Path, folder: Path, rows: Path,
         work: Path) -> int:
    """The step's own instructions: set up and run, less set up only."""
    warm_up(kind, source, template, folder, rows, work)
    return (count(kind, source, template, folder, rows, True, work)
            - count(kind, source, template, folder, rows, False, work))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        kind, url, folder, rows, run = argv[1:6]
        _child(kind, url, folder, rows, run == "1")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=int, default=2000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--source", type=Path, action="append", default=[],
                        help="another checkout's folder (repeatable); default: this one")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("instructions.py: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    import measure
    import run as run_py

    from registry_db import store

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        _, folder = run_py.registry_folder(work, args.profiles, args.files)
        rows = measure.rows_file(folder)
        template = work / "instructions-template.db"
        template.unlink(missing_ok=True)
        store.open_registry(f"sqlite:///{template}").dispose()
        sources: list[Path | None] = [s.resolve() for s in args.source] or [None]
        out: dict[str, Any] = {"profiles": args.profiles, "files": args.files,
                               "floor": step("floor", None, template, folder, rows, work),
                               "ours": {}}
        for source in sources:
            name = str(source or HERE.parent)
            out["ours"][name] = step("ours", source, template, folder, rows, work)
        out["ratio_vs_floor"] = {n: v / out["floor"] for n, v in out["ours"].items()}
        first = next(iter(out["ours"].values()))
        out["vs_first"] = {n: v / first for n, v in out["ours"].items()}
    text = json.dumps(out, indent=1)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
