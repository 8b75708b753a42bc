"""A :class:`~registry_db.model.ProfileSet` as the spec's YAML file, written safely.

The inverse of :mod:`registry_db.sources.profile_set`'s reader, shared by everything that writes
set files: ``registry export`` (:mod:`registry_db.importing.export`) and the sources' ``ingest``
(:mod:`registry_db.sources.ingested`). A set becomes the spec's document: keys in the spec's
order, absent fields left out, numbers as Python's shortest round-tripping ``repr`` (4.07, never
4.0699999). A provenance that several profiles of a set cite is one dict referenced several
times, so :func:`registry_db.yaml.dump.dump_yaml` writes it once with an anchor (named after
its source document, e.g. ``&dsv41flash_dspark``) and then as aliases, as in the spec's example.

A file is written to a temporary file beside it and renamed, so an interruption never leaves
half a file; it gets the mode ``open()`` would give it (a replaced file keeps its own).
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

from registry_db.errors import RegistryError
from registry_db.model import (
    KIND,
    PROFILE_KEYS,
    PROVENANCE_KEYS,
    SAMPLING_KEYS,
    TEMP_PREFIX,
    TEMP_SUFFIX,
    Profile,
    ProfileSet,
    Provenance,
    set_name_problem,
)

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
    # Imported here: `registry show --json` builds the document without loading PyYAML.
    from registry_db.yaml.dump import dump_yaml

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


def _profile(p: Profile, shared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    values = {
        "model": p.model, "speculative_method": p.speculative_method,
        "num_spec_tokens": p.num_spec_tokens, "thinking": p.thinking, "category": p.category,
        "acceptance_length": p.acceptance_length,
        "per_position_rates": None if p.per_position_rates is None
        else list(p.per_position_rates),
        "counts": None if p.counts is None else p.counts.to_json(),
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


def write_atomically(path: Path, content: str | bytes) -> None:
    """Replace ``path`` with ``content`` (text as UTF-8 with ``\\n`` line ends, or bytes) by a
    rename: readers see the old file or the new one, never half of one. A symlink at ``path``
    is replaced itself, never followed: what it points at is left as it was."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    mode = _file_mode(path)
    # The name's shape is model.MAX_SET_NAME_BYTES's reckoning.
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", suffix=TEMP_SUFFIX,
                               dir=path.parent)
    try:
        # mkstemp makes 0600 whatever the umask; the file gets what open() would have given it.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def refuse_overwrites(targets: Sequence[tuple[Path, str | bytes]], elsewhere: str) -> None:
    """Raise :class:`RegistryError`, naming them all, when any target path exists as anything
    but a regular file holding exactly its new content: a different file is not replaced
    without ``--force``, and a symlink (never followed) or a folder counts as different.
    ``elsewhere`` says where else the user may write (``choose another folder with -o``)."""
    differ = []
    for path, content in targets:
        data = content.encode("utf-8") if isinstance(content, str) else content
        if os.path.lexists(path) and (path.is_symlink() or not path.is_file()
                                      or path.read_bytes() != data):
            differ.append(str(path))
    if differ:
        shown = ", ".join(differ[:5]) + (f", … ({len(differ)} in all)" if len(differ) > 5 else "")
        raise RegistryError(
            f"{len(differ)} file(s) exist with other content: {shown}; nothing was written "
            f"(pass --force to replace them, or {elsewhere})")


def _file_mode(path: Path) -> int:
    """The mode a replaced regular file keeps, else (a new file, or a symlink, whose own mode
    says nothing) what the umask gives a new file (0666 & ~umask)."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        pass
    umask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(umask)
    return 0o666 & ~umask
