"""An import's memory is bounded by its largest file, not by its folder (importing/held.py): the
sets read wait for the write packed, a few dozen bytes a profile, and are written one at a time.

Measured as the Python heap's peak (``tracemalloc``, deterministic for one interpreter; the
database's own page cache is not in it, and is bounded by ``WRITE_CACHE_KIB``): a folder of
many files costs, per profile more, a fraction of what a set's objects cost (about 700 bytes a
profile when every set was held as objects; ``benchmarks/`` measures the whole process's RSS).
"""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

from registry_db.importing import write as importer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import generate  # noqa: E402

PER_FILE = 500
#: Bytes a profile more in the folder may add to the peak: what a held set and its key codes
#: cost (about 40 and 75), with room; every set held as objects cost about 700.
MAX_BYTES_PER_PROFILE = 250


def _peak(engine, folder: Path) -> int:
    tracemalloc.start()
    try:
        importer.import_paths(engine, [folder])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_larger_folder_costs_little_more_than_its_largest_file(engine, tmp_path):
    # The same first sets in each folder (same names, same bytes): a later import skips them.
    small, medium, large = (tmp_path / "s", 2), (tmp_path / "m", 4), (tmp_path / "l", 12)
    for folder, files in (small, medium, large):
        generate.write_registry(generate.default_layout(files * PER_FILE, files), folder)
    _peak(engine, small[0])  # imports, caches and statements warmed
    two = _peak(engine, medium[0])  # sets 3 and 4 read, held and written
    eight = _peak(engine, large[0])  # sets 5 to 12
    per_profile = (eight - two) / (6 * PER_FILE)
    assert per_profile < MAX_BYTES_PER_PROFILE, (two, eight, per_profile)
