"""What every source hands back, and how its sets become files that the registry accepts.

A source reads foreign data into :class:`~registry_db.model.ProfileSet` objects. Before any byte
is written, each set is rendered by :func:`~registry_db.yaml.render.render_set` (so a
provenance shared by many profiles is one anchor, and numbers round-trip) and the text is read
back and checked by the registry's own validator: a source can never write a file that
``registry validate`` would refuse. Writing is all or nothing per call: every target name is
checked before the first file is created.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from registry_db.errors import Finding, InvalidInput, RegistryError, UsageError
from registry_db.inputs.profile_set import YAML_SUFFIXES, check_profile_set
from registry_db.model import ProfileSet
from registry_db.yaml.load import load_yaml
from registry_db.yaml.render import file_name, render_set, write_atomically

_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Ingested:
    """A source's result: the sets (each with its rendered YAML) and the warnings met on the way."""

    sets: tuple[ProfileSet, ...]
    texts: tuple[str, ...]
    warnings: tuple[Finding, ...] = ()
    #: Every finding of the inputs left out because they had errors (only when the caller
    #: asked to keep going past them: ``ingest inferencex --keep-going``).
    refused: tuple[Finding, ...] = ()


def safe_name(stem: str) -> str:
    """``stem`` made usable as a set and file name: runs of other characters become ``-``."""
    name = _UNSAFE_RE.sub("-", stem).strip("-.")
    return name or "profiles"


def rendered(sets: list[ProfileSet], warnings: list[Finding]) -> Ingested:
    """Render each set and check the text with the registry's validator.

    A finding here means a source built something the spec forbids, which its own checks should
    have reported with the input's position; it is raised as :class:`InvalidInput` all the same,
    so that nothing invalid is ever written.
    """
    texts, problems = [], []
    for ps in sets:
        text = render_set(ps)
        label = f"{ps.name}.yaml"
        try:
            doc = load_yaml(text, label)
        except InvalidInput as exc:
            problems.extend(exc.findings)
            continue
        _, findings = check_profile_set(doc, label)
        problems.extend(f for f in findings if f.is_error)
        texts.append(text)
    if problems:
        raise InvalidInput(problems)
    return Ingested(tuple(sets), tuple(texts), tuple(warnings))


def spec_problems(ps: ProfileSet) -> list[tuple[int | None, str, Finding]]:
    """The errors the registry's validator finds in ``ps``, each with the index of the profile it
    is about (None for the set itself) and the field it names within that profile.

    A source calls this before :func:`rendered`, to report a value the spec refuses (a K above
    the limit, a name too long) where the user wrote it: the input's line, or a flag. Without
    it the finding would point into YAML that was never written.
    """
    doc = load_yaml(render_set(ps), f"{ps.name}.yaml")
    _, findings = check_profile_set(doc, f"{ps.name}.yaml")
    out: list[tuple[int | None, str, Finding]] = []
    for f in findings:
        if not f.is_error:
            continue
        m = _PROFILE_PATH_RE.match(f.path)
        out.append((int(m["index"]), m["field"], f) if m else (None, f.path, f))
    return out


_PROFILE_PATH_RE = re.compile(r"profiles\[(?P<index>[0-9]+)\]\.?(?P<field>.*)")


def write(result: Ingested, out: str) -> list[str]:
    """Write ``result`` to ``out``: ``-`` (stdout), a ``*.yaml``/``*.yml`` file, or a folder.

    A file or stdout takes exactly one set; a folder (created when missing) takes one
    ``<set>.yaml`` per set. Returns what was written (``-`` for stdout). Raises
    :class:`UsageError` when several sets would go to one file.
    """
    if out == "-" or Path(out).suffix in YAML_SUFFIXES:
        if len(result.sets) != 1:
            names = ", ".join(ps.name for ps in result.sets)
            raise UsageError(f"{len(result.sets)} sets ({names}) cannot go to one "
                             f"{'output' if out == '-' else 'file'}; give -o DIR for one file "
                             "per set, or --name SET to merge them into one")
        if out == "-":
            sys.stdout.write(result.texts[0])
            sys.stdout.flush()
            return ["-"]
        targets = [Path(out)]
    else:
        folder = Path(out)
        targets = [folder / file_name(ps.name) for ps in result.sets]
    try:
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
        for target, text in zip(targets, result.texts):
            write_atomically(target, text)
    except OSError as exc:
        raise RegistryError(f"cannot write {exc.filename or out}: {exc.strerror or exc}; "
                            "choose another -o") from exc
    return [str(t) for t in targets]
