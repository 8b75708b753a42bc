"""Which b-trees' pages one import round changes on SQLite, at depth 2 and at depth R (issue 30).

``as_of.py --grow``'s history (the registry imported R times, each round after the first changing
5% of every set's profiles), with, for round 2 and round R, the bytes this process wrote
(``wchar``) and the database's pages compared before and after the round (each settled by a
checkpoint), counted by the table or index that owns them (``dbstat``). An import writes each
distinct page once to the WAL, and once more when its commit checkpoints (past 1,000 pages of
WAL), so the counts say where a round's bytes go and which b-trees grow with the history.

    python benchmarks/round_pages.py --grow 50 --profiles 20000 --files 40
"""

from __future__ import annotations

import argparse
import collections
import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import as_of  # noqa: E402
from run import registry_folder  # noqa: E402

HERE = Path(__file__).resolve().parent


def _pages(path: Path) -> list[bytes]:
    data = path.read_bytes()
    return [data[i:i + 4096] for i in range(0, len(data), 4096)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grow", type=int, default=50)
    ap.add_argument("--profiles", type=int, default=20_000)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--work-dir", type=Path, default=HERE / "work")
    args = ap.parse_args(argv)
    from registry_db import store
    from registry_db.importing.write import import_sets
    from registry_db.sources.profile_set import read

    args.work_dir.mkdir(parents=True, exist_ok=True)
    _, folder = registry_folder(args.work_dir, args.profiles, args.files)
    db = args.work_dir / f"round-pages-{args.profiles}.db"
    url = f"sqlite:///{db}"
    as_of._fresh("sqlite", url, "")
    content = list(read([folder])[0])
    engine = store.open_registry(url)
    out = {}
    try:
        for r in range(1, args.grow + 1):
            content = content if r == 1 else as_of._changed(content, 0.05, r)
            engine.dispose()
            as_of._settle("sqlite", url)
            before = _pages(db) if r in (2, args.grow) else []
            written = as_of._written()
            import_sets(engine, content)
            written = as_of._written() - written
            if not before:
                continue
            engine.dispose()
            as_of._settle("sqlite", url)
            after = _pages(db)
            with sqlite3.connect(db) as conn:
                owner = dict(conn.execute("SELECT pageno, name FROM dbstat"))
            changed: collections.Counter[str] = collections.Counter(
                owner.get(i + 1, "?") for i, page in enumerate(after)
                if i >= len(before) or before[i] != page)
            total = collections.Counter(owner.values())
            out[r] = {"written_mib": round(written / 2**20, 2),
                      "pages_changed": sum(changed.values()), "pages": len(after),
                      "by_btree": {n: [c, total[n]] for n, c in changed.most_common()}}
            print(f"round {r}: wrote {written / 2**20:.2f} MiB, {sum(changed.values())} of "
                  f"{len(after)} pages changed", file=sys.stderr)
    finally:
        engine.dispose()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
