"""A fifth layer added through the tables alone, as docs/architecture.md says ("Adding a layer"):
an ``Input`` row that states it, a ``LayerRow`` in ``LAYERS``, a ``Layer`` member and the
``Request`` field of the same name, and nothing else. The batch answers what each run alone
gets: a run is checked into a :class:`~registry_db.inputs.run.Run` whose stated values come
from the table, so the new layer is part of the key that shares identical runs (issue 23: the
old hand-written key left it out, and ``resolve_many([plain, stated])`` answered both runs with
the plain run's answer)."""

from __future__ import annotations

import dataclasses
import enum

import pytest

from registry_db import model
from registry_db.importing import write as importer
from registry_db.inputs import layers
from registry_db.inputs.inline import INLINE_VALUE
from registry_db.inputs.run import Request, check
from registry_db.model import InlineValue, Layer, Profile, ProfileSet, Provenance, Sampling
from registry_db.resolve.plan import resolve, resolve_many

#: The layers with one more on top: "pilot", above the command line.
Extended = enum.StrEnum("Layer", {**{m.name: m.value for m in Layer}, "PILOT": "pilot"})


@dataclasses.dataclass(frozen=True)
class PilotRequest(Request):
    """The request with the new layer's field (a library caller's, as the recipe adds it)."""

    pilot: InlineValue | None = None


@pytest.fixture
def pilot(monkeypatch):
    """The tables with the pilot layer added, as docs/architecture.md's recipe adds a layer."""
    row = layers.Input("pilot", "pilot", "object", layer=Extended.PILOT, schema=INLINE_VALUE)
    monkeypatch.setattr(model, "Layer", Extended)
    monkeypatch.setattr(layers, "INPUTS", (*layers.INPUTS, row))
    monkeypatch.setattr(layers, "LAYERS", (*layers.LAYERS, layers.LayerRow(Extended.PILOT,
                                                                           "pilot")))


@pytest.fixture
def reg(engine):
    pv = Provenance("https://example.org/m", hardware="b300", engine_image="vllm:1",
                    sampling=Sampling(1.0))
    importer.import_sets(engine, [ProfileSet("alpha", ("test data",), (
        Profile("m", "eagle", 3, "off", "coding", 2.5, "measured", provenance=pv),),
        file="alpha.yaml")])
    return engine


def test_a_fifth_layer_joins_the_batch_key_by_the_tables_alone(reg, pilot):
    plain = PilotRequest("m", "eagle", 3, "off", "coding")
    stated = PilotRequest("m", "eagle", 3, "off", "coding", pilot=InlineValue(3, 3.5))
    alone = [resolve(reg, plain), resolve(reg, stated)]
    assert (alone[0].layer, alone[0].acceptance_length) == ("registry", 2.5)
    assert (alone[1].layer, alone[1].acceptance_length) == ("pilot", 3.5)
    assert resolve_many(reg, [plain, stated]) == alone
    assert resolve_many(reg, [stated, plain, stated]) == [alone[1], alone[0], alone[1]]
    assert check(plain) != check(stated)


def test_the_new_layer_is_checked_like_every_layer(reg, pilot):
    """Its value is checked by its schema and its K against the run's, winning or not."""
    bad = PilotRequest("m", "eagle", 3, "off", "coding", pilot=InlineValue(3, 9.0))
    other_k = PilotRequest("m", "eagle", 3, "off", "coding", pilot=InlineValue(2, 1.5))
    invalid, mismatch = resolve_many(reg, [bad, other_k])
    assert invalid.reason == "invalid_value" and "the pilot layer's value" in invalid.message
    assert mismatch.reason == "k_mismatch" and "the pilot layer's value" in mismatch.message
