"""The import against its floor in instructions executed, where CPU time is too noisy to tell.

    python benchmarks/instructions.py [--profiles 2000] [--files 4] [--source DIR ...]

Under ``valgrind --tool=callgrind``, which counts the instructions a process executes (the same
count from run to run, whatever else the machine does), for the floor (``baselines.py``'s:
libyaml's events, then the bulk write into every table an import writes) and for
``import_paths`` of each source tree (this checkout's code by default; each ``--source`` is
another checkout's folder, whose ``registry_db`` is put first on ``sys.path``): a process that
sets up and runs the step, less one that only sets up (interpreter, an open database, the
floor's rows loaded, and every module the step loads, as a warm-up run outside valgrind lists
them), with ``PYTHONHASHSEED=0``. Prints one JSON object: each step's
instructions, ours ÷ the floor per tree, and each tree against the first.

Instructions are not time: a cache miss or a system call costs more than its count says, and
SQLite's file writes count only as the CPU work around them. Use it to compare two trees, or
to see the Python work against the floor's, when the machine's own noise (on a shared virtual
machine, CPU steal) is larger than the change; each process runs about 50 times slower.
"""

from __future__ import annotations

import argparse
import importlib
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
sys.path.insert(0, str(HERE))  # baselines, measure, run: this folder's modules
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


#: ``--steps``: the floor's two, then ours (each after those before it, not counted).
STEPS = ("floor_events", "floor_write", "plain", "checks", "hashes", "import_sets")


def collected(stderr: str) -> int:
    """The instruction count callgrind prints on exit (``==PID== Collected : N``)."""
    found = _COLLECTED.findall(stderr)
    if not found:
        raise RuntimeError(f"no callgrind count in: {stderr[-500:]}")
    return int(found[-1])


def _child(kind: str, url: str, folder: str, rows: str, run: bool) -> None:
    """One measured process: set up ``kind`` (``floor``, ``ours`` or one of :data:`STEPS`)
    and, with ``run``, run it.

    Set-up imports the modules the step loads on its way (the warm-up lists them), so that
    neither side's count holds the other's imports: the step is its work alone.
    """
    listed = os.environ.get("INSTRUCTIONS_MODULES")
    for name in Path(listed).read_text().split() if listed else ():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a module that only loads in its context)
            pass
    go, close = _setup(kind, url, folder, rows)
    before = set(sys.modules)
    try:
        if run:
            go()
    finally:
        close()
    record = os.environ.get("INSTRUCTIONS_RECORD")
    if record:
        Path(record).write_text("\n".join(sorted(set(sys.modules) - before)) + "\n")


def _setup(kind: str, url: str, folder: str, rows: str) -> tuple[Any, Any]:
    """``(step, close)`` for ``kind``, everything before the step done."""
    paths = sorted(Path(folder).glob("*.yaml"))
    if kind in ("floor", "floor_events", "floor_write"):
        import marshal

        import baselines

        data = marshal.loads(Path(rows).read_bytes())
        events = lambda: baselines.parse_events(paths)  # noqa: E731
        write_ = lambda: baselines.write_rows(url, data)  # noqa: E731
        if kind == "floor":
            return lambda: (events(), write_()), lambda: None
        return events if kind == "floor_events" else write_, lambda: None
    from registry_db import store
    from registry_db.gcpause import gc_paused
    from registry_db.importing import write
    from registry_db.inputs.profile_set import check_profile_set
    from registry_db.yaml.plain import load_plain_file

    engine = store.open_registry(url)
    with gc_paused():  # the steps' inputs, built as the import builds them
        # The import's steps (`--steps`), each after the ones before it, as import_phases.py.
        docs = [] if kind in ("ours", "plain") else [load_plain_file(p) for p in paths]
        sets = [] if kind in ("ours", "plain", "checks") else [
            check_profile_set(d, str(p))[0] for d, p in zip(docs, paths)]
    steps = {
        "ours": lambda: write.import_paths(engine, [Path(folder)]),
        "plain": lambda: [load_plain_file(p) for p in paths],
        "checks": lambda: [check_profile_set(d, str(p)) for d, p in zip(docs, paths)],
        "hashes": lambda: [s.content_hash() for s in sets],
        "import_sets": lambda: write.import_sets(engine, sets),
    }

    def paused() -> None:
        with gc_paused():  # as `registry import` runs it
            steps[kind]()

    return paused, engine.dispose


def count(kind: str, source: Path | None, template: Path, folder: Path, rows: Path,
          run: bool, work: Path) -> int:
    """Instructions of one child process (a fresh copy of ``template`` as its database)."""
    db = _fresh_db(template, work / "measured.db")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
           *_child_command(kind, db, folder, rows, run)]
    env = {**_env(source), "INSTRUCTIONS_MODULES": str(_modules_file(kind, work))}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          cwd=str(source or HERE.parent))
    if done.returncode != 0:
        raise RuntimeError(f"{kind} failed ({done.returncode}): {done.stderr[-2000:]}")
    return collected(done.stderr)


def warm_up(kind: str, source: Path | None, template: Path, folder: Path, rows: Path,
            work: Path) -> None:
    """One run outside valgrind, so that every module's bytecode is cached before counting."""
    db = _fresh_db(template, work / "warm-up.db")
    env = {**_env(source), "INSTRUCTIONS_RECORD": str(_modules_file(kind, work))}
    subprocess.run(_child_command(kind, db, folder, rows, True), check=True, env=env,
                   cwd=str(source or HERE.parent), capture_output=True)


def _fresh_db(template: Path, db: Path) -> Path:
    """``db`` as a fresh copy of ``template`` (an empty registry at the schema head)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, db)
    return db


def _modules_file(kind: str, work: Path) -> Path:
    return work / f"instructions-{kind}-modules.txt"


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
    parser.add_argument("--steps", action="store_true",
                        help="also each step: the floor's events and write; our plain values, "
                             "checks, content hashes, import_sets (hashes included)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("instructions.py: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)
        return 2
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
        if args.steps:
            out["steps"] = {name: {kind: step(kind, source, template, folder, rows, work)
                                   for kind in STEPS}
                            for source in sources for name in [str(source or HERE.parent)]}
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
