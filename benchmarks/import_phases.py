"""Where an import's CPU goes, step by step, against the floor's two steps (issue 30.6).

    python benchmarks/import_phases.py FOLDER [--repeats 2]

On the SQLite backend, in process, the collector paused as ``registry import`` pauses it: the
floor's parse (libyaml's events; ``yaml.compose`` for reference) and write (``executemany`` of
the prepared rows into every table an import writes), and the import's steps: plain values
from the events, the schema checks, the sets' content hashes, and ``import_sets`` (content
hashes included). Prints one JSON object of CPU seconds per repeat, with two ratios: the
steps' sum over the floor's, and the same with the floor's write in place of ``import_sets``
(what the values, checks and hashes alone leave of a target).
"""

from __future__ import annotations

import argparse
import json
import marshal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baselines  # noqa: E402
import measure  # noqa: E402


def _cpu(fn: Any) -> tuple[Any, float]:
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def phases(folder: Path) -> dict[str, float]:
    """CPU seconds of each step over ``folder``'s ``*.yaml`` files, and the two ratios."""
    from registry_db import store
    from registry_db.gcpause import gc_paused
    from registry_db.importing import write
    from registry_db.inputs.profile_set import check_profile_set
    from registry_db.yaml.plain import load_plain_file

    paths = sorted(folder.glob("*.yaml"))
    rows = marshal.loads(measure.rows_file(folder).read_bytes())
    out: dict[str, float] = {}
    with gc_paused(), tempfile.TemporaryDirectory() as work:
        _, out["floor: events"] = _cpu(lambda: baselines.parse_events(paths))
        _, out["floor: compose (reference)"] = _cpu(lambda: baselines.compose_files(paths))
        floor_url = f"sqlite:///{work}/floor.db"
        store.open_registry(floor_url).dispose()
        _, out["floor: write"] = _cpu(lambda: baselines.write_rows(floor_url, rows))
        docs, out["plain values"] = _cpu(lambda: [load_plain_file(p) for p in paths])
        sets, out["checks"] = _cpu(lambda: [check_profile_set(d, str(p))[0]
                                            for d, p in zip(docs, paths)])
        _, out["content hashes"] = _cpu(lambda: [s.content_hash() for s in sets])
        engine = store.open_registry(f"sqlite:///{work}/ours.db")
        try:
            _, out["import_sets (hashes included)"] = _cpu(
                lambda: write.import_sets(engine, sets))
        finally:
            engine.dispose()
    floor = out["floor: events"] + out["floor: write"]
    steps = out["plain values"] + out["checks"]
    # What the import cannot go below with these steps: its values, checks and hashes over the
    # floor's own write (no ids read back, no key stretches looked up, no SQLAlchemy).
    out["ratio: steps ÷ floor"] = (steps + out["import_sets (hashes included)"]) / floor
    out["ratio: values, checks, hashes and the floor's write ÷ floor"] = (
        steps + out["content hashes"] + out["floor: write"]) / floor
    return {k: round(v, 3) for k, v in out.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    for _ in range(args.repeats):
        print(json.dumps(phases(args.folder)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
