"""Stored sets back to YAML files that import to the same rows.

A set becomes the spec's document: keys in the spec's order, absent fields left out, numbers as
Python's shortest round-tripping ``repr`` (4.07, never 4.0699999). A provenance that several
profiles of a set cite is one dict referenced several times, so
:func:`registry_db.yaml.dump.dump_yaml` writes it once with an anchor (named after its source
document, e.g. ``&dsv41flash_dspark``) and then as aliases, as in the spec's example.

Each set goes to ``<name>.yaml`` in the output folder, written to a temporary file and renamed,
so an interrupted export never leaves half a file; the file gets the mode ``open()`` would give
it (a replaced file keeps its own). A set whose name is not a safe file name
(empty, hidden, holding ``/``, ``\\`` or NUL, or too long) is refused before anything is
written; ``-o -`` prints such a set instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from registry_db.errors import RegistryError
from registry_db.model import (
    KIND,
    PROFILE_KEYS,
    PROVENANCE_KEYS,
    SAMPLING_KEYS,
    Profile,
    ProfileSet,
    Provenance,
    set_name_problem,
)
from registry_db.store import read as store
from registry_db.yaml.dump import dump_yaml

#: What an anchor name may not hold: YAML emitters (PyYAML's) accept only letters, digits, '-'
#: and '_', and refuse the rest with an exception.
_ANCHOR_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


def set_document(ps: ProfileSet) -> dict[str, Any]:
    """The set as the spec's mapping. A provenance cited twice is the same dict object twice."""
    shared: dict[str, dict[str, Any]] = {}
    doc: dict[str, Any] = {"kind": KIND, "name": ps.name}
    if ps.caveats:
        doc["caveats"] = list(ps.caveats)
    doc["profiles"] = [_profile(p, shared) for p in ps.profiles]
    return doc


def render_set(ps: ProfileSet) -> str:
    """The set as YAML text in the spec's format; shared provenances become anchor + aliases."""
    doc = set_document(ps)
    counts: dict[int, int] = {}
    provs: dict[int, dict[str, Any]] = {}
    for p in doc["profiles"]:
        if "provenance" in p:
            key = id(p["provenance"])
            counts[key] = counts.get(key, 0) + 1
            provs[key] = p["provenance"]
    anchors: dict[int, str] = {}
    used: set[str] = set()
    for key, n in counts.items():
        if n > 1:
            anchors[key] = _anchor_name(provs[key]["source"], used)
    return dump_yaml(doc, anchors=anchors)


def file_name(name: str) -> str:
    """``<name>.yaml``, or :class:`RegistryError` when the name cannot safely be a file name
    (the validator's rule, :func:`registry_db.model.set_name_problem`, so that a set stored
    before the rule was kept still exports with a clear message)."""
    bad = set_name_problem(name)
    if bad:
        raise RegistryError(f"set {name!r} cannot be exported to a file because {bad}; "
                            "print it with `registry export -o - SET` instead")
    return f"{name}.yaml"


def export_sets(engine: Engine, names: Sequence[str] | None = None,
                out_dir: str | Path = ".", *, force: bool = False) -> list[Path]:
    """Write each named set (every set when ``names`` is None or empty) to ``out_dir``.

    Returns the written paths in set order. Unknown names raise
    :class:`~registry_db.errors.NotFound`; unsafe names raise before any file is written; a
    folder that cannot be written raises :class:`~registry_db.errors.RegistryError`. An
    existing file whose content differs from the export (a hand-written file, its comments
    included) is replaced only with ``force``; otherwise :class:`RegistryError` names every
    such file and nothing is written.
    """
    sets = store.load_sets(engine, list(names) if names else None)
    targets = [file_name(ps.name) for ps in sets]
    out = Path(out_dir)
    texts = [render_set(ps) for ps in sets]
    written = []
    try:
        if not force:
            _refuse_overwrites([out / t for t in targets], texts)
        out.mkdir(parents=True, exist_ok=True)
        for text, target in zip(texts, targets):
            path = out / target
            _write_atomically(path, text)
            written.append(path)
    except OSError as exc:
        raise RegistryError(f"cannot write to {exc.filename or out}: {exc.strerror or exc}; "
                            "choose another folder with -o") from exc
    return written


def _refuse_overwrites(paths: Sequence[Path], texts: Sequence[str]) -> None:
    """Raise, naming them all, when any of ``paths`` exists with content other than its text."""
    differ = []
    for path, text in zip(paths, texts):
        if path.exists() and (not path.is_file()
                              or path.read_bytes() != text.encode("utf-8")):
            differ.append(str(path))
    if differ:
        shown = ", ".join(differ[:5]) + (f", … ({len(differ)} in all)" if len(differ) > 5 else "")
        raise RegistryError(
            f"{len(differ)} file(s) exist with other content: {shown}; nothing was written "
            "(pass --force to replace them, or choose another folder with -o)")


def render_sets(engine: Engine, names: Sequence[str] | None = None) -> str:
    """The one named set (or the registry's only set when ``names`` is empty) as YAML text.

    Several sets are refused: a stream of documents is not an input ``registry import`` reads
    (one set per file), so printing one would promise a round trip that does not exist.
    """
    if names and len(set(names)) > 1:
        raise RegistryError(f"-o - prints one set, and {len(set(names))} were named; name one "
                            "SET, or write them all to a folder with -o DIR (import reads one "
                            "set per file)")
    sets = store.load_sets(engine, list(names) if names else None)
    if len(sets) > 1:
        shown = ", ".join(ps.name for ps in sets[:3]) + (", ..." if len(sets) > 3 else "")
        raise RegistryError(f"-o - prints one set, and the registry holds {len(sets)} ({shown}); "
                            "name one SET, or write them all to a folder with -o DIR (import "
                            "reads one set per file)")
    return "".join(render_set(ps) for ps in sets)


def _profile(p: Profile, shared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    values = {
        "model": p.model, "speculative_method": p.speculative_method,
        "num_spec_tokens": p.num_spec_tokens, "thinking": p.thinking, "category": p.category,
        "acceptance_length": p.acceptance_length,
        "per_position_rates": None if p.per_position_rates is None
        else list(p.per_position_rates),
        "method": p.method, "provenance": None, "rationale": p.rationale,
        "copied_from": p.copied_from,
    }
    if p.provenance is not None:
        h = p.provenance.content_hash()
        if h not in shared:
            shared[h] = _provenance(p.provenance)
        values["provenance"] = shared[h]
    return {k: values[k] for k in PROFILE_KEYS if values[k] is not None}


def _provenance(pv: Provenance) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in PROVENANCE_KEYS:
        if k == "sampling":
            if pv.sampling is not None:
                out[k] = {s: getattr(pv.sampling, s) for s in SAMPLING_KEYS
                          if getattr(pv.sampling, s) is not None}
        elif k == "settings":
            if pv.settings:
                out[k] = dict(pv.settings)
        elif getattr(pv, k) is not None:
            out[k] = getattr(pv, k)
    return out


def _anchor_name(source: str, used: set[str]) -> str:
    """A readable anchor: the source document's stem (``dsv41flash_dspark``), else ``prov``."""
    stem = source.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    stem = stem.rsplit(".", 1)[0] if "." in stem.strip(".") else stem
    base = _ANCHOR_CHARS.sub("_", stem).strip("_-")[:40] or "prov"
    name, n = base, 1
    while name in used:
        n += 1
        name = f"{base}-{n}"
    used.add(name)
    return name


def _write_atomically(path: Path, text: str) -> None:
    mode = _file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600 whatever the umask; the file gets what open() would have given it.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _file_mode(path: Path) -> int:
    """The mode a replaced file keeps, else what the umask gives a new file (0666 & ~umask)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0o022)  # reading the umask means setting it; put it straight back
        os.umask(umask)
        return 0o666 & ~umask
