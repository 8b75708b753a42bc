"""The sets InferenceX curves make: one per file, or merged into one, each checked by the
registry's own validator with its findings put where the user wrote the value."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from registry_db.errors import Finding
from registry_db.model import Profile, ProfileSet
from registry_db.sources.inferencex.facts import Origin
from registry_db.sources.inferencex.map import CurveMap
from registry_db.sources.ingested import spec_problems

#: Where each fact of a set's profiles came from: ``(mode, field)`` for the provenance,
#: ``(None, field)`` for the key, ``("cell", mode, K)`` for the value.
Where = dict[tuple, Origin]
#: A file's set, and where its facts came from.
Built = tuple[str, ProfileSet, Where]


def unused(curve_map: CurveMap, names: Iterable[str], used: set[tuple[str, str]]
           ) -> list[Finding]:
    """A warning for each map entry no input used (a misspelt name does nothing otherwise):
    ``names`` are the files read or referred to, ``used`` the other entries looked up."""
    named = set(names)
    out = []
    for (section, key), at in curve_map.where.items():
        if not (key in named if section == "files" else (section, key) in used):
            out.append(Finding(curve_map.file or "", at[0], at[1], f"{section}.{key}",
                               "unused_map_entry", f"{key!r} matched no input; check its "
                               "spelling", severity="warning"))
    return out


def per_file(built: list[Built], findings: list[Finding]
              ) -> list[ProfileSet]:
    out: list[ProfileSet] = []
    named: dict[str, str] = {}
    for file, ps, _ in built:
        if ps.name in named:
            findings.append(Finding(file, 1, 1, "", "duplicate_set_name",
                                    f"this file's set would be named {ps.name!r}, as "
                                    f"{named[ps.name]}'s is; give --name to merge them, or "
                                    "rename one file"))
            continue
        named[ps.name] = file
        out.append(ps)
    return out


def merge(built: list[Built], name: str, findings: list[Finding]
           ) -> list[ProfileSet]:
    """One set of every file's profiles; a file holding a key another holds is left out."""
    profiles: list[Profile] = []
    caveats: list[str] = []
    seen: dict[tuple, str] = {}
    for file, ps, where in built:
        twins = [p for p in ps.profiles if p.key in seen]
        for p in twins:
            at = where[("cell", p.thinking, p.num_spec_tokens)]
            findings.append(Finding(
                file, at.line, at.column, p.label, "duplicate_profile_key",
                f"profile {p.label} is in both {seen[p.key]} and {file}; one set holds one "
                f"value per key: give one curve its own method name with --map (files: "
                f"{{{Path(file).name}: {{method: {p.speculative_method}-VARIANT}}}}), or "
                "leave out --name to make one set per file"))
        if not twins:
            seen.update((p.key, file) for p in ps.profiles)
            profiles.extend(ps.profiles)
            caveats.extend(ps.caveats)
    return [ProfileSet(name, tuple(dict.fromkeys(caveats)), tuple(profiles))] if profiles else []


def spec_say(file: str, ps: ProfileSet, where: Where, findings: list[Finding]) -> bool:
    """What the registry's validator says of ``ps``, at the line, map entry or flag that gave
    the value (the user never sees the YAML it was said of); True when anything is an error."""
    said = False
    for index, what, f in spec_problems(ps):
        p = ps.profiles[index] if index is not None else None
        origin = None
        if p is not None:
            field_name = what.removeprefix("provenance.")
            origin = (where.get((p.thinking, field_name)) or where.get((None, field_name))
                      or where.get(("cell", p.thinking, p.num_spec_tokens)))
        if origin is not None and origin.file:
            findings.append(Finding(origin.file, origin.line, origin.column, what, f.code,
                                    f.message))
        else:
            prefix = f"{origin.label}: " if origin is not None else ""
            findings.append(Finding(file, 1, 1, what, f.code, prefix + f.message))
        said = True
    return said
