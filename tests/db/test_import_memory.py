"""An import's memory is bounded by its largest file, not by its folder (importing/held.py): the
sets read wait for the write packed, a few dozen bytes a profile, and are written one at a time.

Measured as the Python heap's peak (``tracemalloc``, deterministic for one interpreter; the
database's own page cache is not in it, and is bounded by ``WRITE_CACHE_KIB``): a folder of
many files costs, per profile more, a fraction of what a set's objects cost (about 700 bytes a
profile when every set was held as objects; ``benchmarks/`` measures the whole process's RSS).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import generate  # noqa: E402

PER_FILE = 500
#: Bytes a profile more in the folder may add to the peak: what a held set and its key codes
#: cost (about 40 and 75), with room; every set held as objects cost about 700.
MAX_BYTES_PER_PROFILE = 250

#: Measured in a fresh interpreter: a test process's earlier tests leave objects and caches
#: behind that move the heap's peak (seen: 734 bytes a profile after another module's tests).
_MEASURE = """
import sys, tracemalloc
from registry_db import store
from registry_db.importing import write as importer

def peak(engine, folder):
    tracemalloc.start()
    try:
        importer.import_paths(engine, [folder])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

engine = store.open_registry(sys.argv[1])
peak(engine, sys.argv[2])  # imports, caches and statements warmed
two = peak(engine, sys.argv[3])  # sets 3 and 4 read, held and written
eight = peak(engine, sys.argv[4])  # sets 5 to 12
engine.dispose()
print(two, eight)
"""


def test_a_larger_folder_costs_little_more_than_its_largest_file(db_url, tmp_path):
    # The same first sets in each folder (same names, same bytes): a later import skips them.
    folders = []
    for name, files in (("s", 2), ("m", 4), ("l", 12)):
        generate.write_registry(generate.default_layout(files * PER_FILE, files), tmp_path / name)
        folders.append(str(tmp_path / name))
    out = subprocess.run([sys.executable, "-c", _MEASURE, db_url, *folders], check=True,
                         capture_output=True, text=True).stdout
    two, eight = map(int, out.split())
    per_profile = (eight - two) / (8 * PER_FILE)
    assert per_profile < MAX_BYTES_PER_PROFILE, (two, eight, per_profile)
