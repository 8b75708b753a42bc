"""A set's content hash: the digest of its canonical JSON, whichever way the text is built.

``ProfileSet.content_hash`` writes each profile's text by template when its fields have a
checked profile's types; stored registries hold the digests of the definition below (the
encoder's text of ``canonical()``), so every way must give exactly that text.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from registry_db.model import Counts, Profile, ProfileSet, Provenance, Sampling
from registry_db.sources.profile_set import check_paths

ROOT = Path(__file__).resolve().parents[2]


def _definition(s: ProfileSet) -> str:
    """The content hash as defined (model.py before the template, 6d5436e)."""
    form = {"name": s.name, "caveats": list(s.caveats),
            "profiles": [p.canonical() for p in s.profiles]}
    text = json.dumps(form, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _corpus() -> list[ProfileSet]:
    folders = [ROOT / "seed" / "acceptance", *sorted((ROOT / "tests" / "data").rglob("valid"))]
    paths = sorted(p for f in folders for p in f.rglob("*.yaml"))
    sets, _ = check_paths(paths)
    return sets


def test_every_valid_set_of_the_corpus_hashes_as_defined():
    sets = _corpus()
    assert len(sets) > 5
    assert sum(len(s.profiles) for s in sets) > 20
    for s in sets:
        assert s.content_hash() == _definition(s), s.name


def test_the_seed_keeps_the_hash_stored_registries_hold():
    # Digest of "name hash" lines of the seed's sets, computed with 6d5436e's model.py: a
    # registry imported before the template stays `unchanged` on re-import.
    sets, _ = check_paths(sorted((ROOT / "seed" / "acceptance").glob("*.yaml")))
    lines = "\n".join(f"{s.name} {s.content_hash()}" for s in sets)
    assert hashlib.sha256(lines.encode()).hexdigest() == (
        "093d169d4e720b73cd00a18a980874a450430fc5094dcce6d0537edd4ce4e1ab")


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_floats = st.floats(allow_nan=True, allow_infinity=True) | st.floats(-1e308, 1e308)
_numbers = _floats | st.integers(-10, 10) | st.booleans()


class _Float(float):
    """A float subclass: json writes it as a float, and so must the template."""


_provenance = st.builds(
    Provenance, source=_text, run=st.none() | _text, benchmark=st.none() | _text,
    prompts=st.none() | st.integers(0, 10**6), tp=st.none() | st.integers(1, 8),
    sampling=st.none() | st.builds(Sampling, temperature=st.none() | _numbers,
                                   top_p=st.none() | _numbers,
                                   max_tokens=st.none() | st.integers(1, 10**5)),
    settings=st.lists(st.tuples(_text, _text | _numbers), max_size=3).map(tuple))

_profile = st.builds(
    Profile, model=_text | st.none(), speculative_method=_text, thinking=_text,
    category=_text,
    num_spec_tokens=st.integers(-3, 70) | st.booleans(),
    acceptance_length=_numbers | _floats.map(_Float),
    method=_text,
    per_position_rates=st.none() | st.lists(_numbers, max_size=4).map(tuple),
    provenance=st.none() | _provenance,
    rationale=st.none() | _text, copied_from=st.none() | _text,
    counts=st.none() | st.builds(Counts, drafts=st.integers(1, 100),
                                 draft_tokens=st.integers(0, 500),
                                 accepted_tokens=st.integers(0, 500),
                                 accepted_per_position=st.none() | st.lists(
                                     st.integers(0, 100), max_size=3).map(tuple)))


@settings(max_examples=400, deadline=None)
@given(name=_text, caveats=st.lists(_text, max_size=2), profiles=st.lists(_profile, max_size=4),
       shared=st.booleans())
def test_any_profiles_hash_as_defined(name, caveats, profiles, shared):
    """Text with escapes and non-ASCII, NaN and infinities, ints and bools where floats or an
    int K belong, a None where text belongs, counts, shared provenance objects: each profile
    takes the template or the encoder, and the digest is the definition's."""
    if shared and len(profiles) > 1 and profiles[0].provenance is not None:
        pv = profiles[0].provenance
        profiles = [Profile(**{**p.__dict__, "provenance": pv}) for p in profiles]
    s = ProfileSet(name, tuple(caveats), tuple(profiles))
    assert s.content_hash() == _definition(s)


def test_a_profile_of_checked_types_takes_the_template(monkeypatch):
    """The template is what a checked profile's text comes from (the encoder is not called
    for it), so the property above does test it."""
    import registry_db.model as model

    calls = []
    real = model._canonical_json
    monkeypatch.setattr(model, "_canonical_json", lambda obj: calls.append(obj) or real(obj))
    pv = Provenance("https://example.org/run", prompts=3)
    p = Profile("m", "mtp", 3, "on", "coding", 2.5, "measured", (0.75, 0.5, 0.25), pv,
                rationale="r\u00e9 \"q\"")
    s = ProfileSet("s", ("c",), (p, p))
    assert s.content_hash() == _definition(s)
    profile_forms = [c for c in calls if isinstance(c, dict) and "key" in c]
    assert profile_forms == []  # neither profile went through the encoder
    assert sum(1 for c in calls if isinstance(c, dict) and "source" in c) == 1  # pv once
    assert math.isfinite(p.acceptance_length)
