"""A refusal is a value: the many-at-once resolver returns it in place of an answer, and only the
one-at-a-time resolver raises it, as ResolutionRefused carrying the same Refusal."""

from __future__ import annotations

import pytest

from registry_db.errors import ResolutionRefused
from registry_db.importing import write as importer
from registry_db.model import Refusal, RefusalReason
from registry_db.resolve import Request, resolve, resolve_many
from tests.helpers import SEED


def test_resolve_many_returns_refusals_and_resolve_raises_the_same(engine):
    importer.import_paths(engine, [SEED])
    runs = [Request("glm-5.3", "mtp", 3, "on", "chat"),
            Request("glm-5.3", "mtp", 3, "on", "coding"),
            Request("glm-5.3", "mtp", 3, "sometimes", "coding")]
    missing, found, bad = resolve_many(engine, runs)
    assert type(missing) is Refusal and missing.reason == RefusalReason.NO_MATCH
    assert found.acceptance_length == 2.99
    assert bad == Refusal("invalid_request", "thinking must be 'on' or 'off', got 'sometimes'")
    for run, value in ((runs[0], missing), (runs[2], bad)):
        with pytest.raises(ResolutionRefused) as info:
            resolve(engine, run)
        assert info.value.refusal == value
        assert (info.value.reason, info.value.message) == (value.reason, value.message)
        assert info.value.to_json() == value.to_json()
