"""The import figures alone: a fresh import against its honest floor, and the re-import.

``measure.bench_import`` on one generated registry per backend (100,000 profiles in 200 files
by default): per repeat the floor (libyaml's events + ``executemany`` into every table an
import writes), ``import_paths`` in process, ``registry import`` into a fresh registry, and
``registry import`` of the same folder again (every file unchanged). Prints the table's import
lines and writes every run to ``--out``:

    python benchmarks/imports.py --backends sqlite,postgresql --out results/imports.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure  # noqa: E402
import run  # noqa: E402
from backends import Backend, git_revision, machine  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--profiles", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--work-dir", type=Path, default=run.HERE / "work")
    parser.add_argument("--out", type=Path, default=run.HERE / "results" / "imports.json")
    args = parser.parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.backends.split(","):
        layout, folder = run.registry_folder(args.work_dir, args.profiles, args.files)
        with tempfile.TemporaryDirectory() as db_dir:
            backend = Backend(name, Path(db_dir), args.postgres_url)
            try:
                imp, _ = measure.bench_import(backend, folder, args.repeats)
            finally:
                backend.close()
        rows.append(dict(benchmark="import", backend=name, size=layout.profiles,
                         files=args.files, target=run.TARGETS["import"], **imp))
        for line in run.table_rows(rows[-1]):
            print("| " + " | ".join(line) + " |", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "rows": rows, "machine": machine(args.postgres_url),
            "git": git_revision(run.HERE.parent),
            "command": " ".join(["python", "benchmarks/imports.py", *argv])}, indent=1,
            default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
