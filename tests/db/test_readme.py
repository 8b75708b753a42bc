"""The README's examples run as written (SQLite, in a scratch folder holding the seed)."""

from __future__ import annotations

import re

from registry_db import store
from registry_db.importing.write import import_paths
from tests.helpers import ROOT, SEED

README = (ROOT / "README.md").read_text()


def _block_after(heading: str, lang: str) -> str:
    tail = README.split(heading, 1)[1]
    return re.search(rf"```{lang}\n(.*?)```", tail, re.S).group(1)


def test_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    engine = store.open_registry("sqlite:///registry.db")
    import_paths(engine, [SEED])
    engine.dispose()
    scope: dict = {}
    exec(compile(_block_after("From Python, ", "python"), "README.md", "exec"), scope)
    r, answers, reg = scope["r"], scope["answers"], scope["reg"]
    assert r.acceptance_length == 4.07
    assert r.per_position_rates == (1.0, 1.0, 1.0, 0.07000000000000028, 0.0)
    assert (r.hardware_mismatch.measured_on, r.hardware_mismatch.run_on) == ("b300", "h200")
    assert scope["reason"] == "no_match"
    assert r.revision == 1 and scope["then"].revision == 1
    assert [a.layer for a in answers] == ["registry", "cli"]
    assert answers[0].fallback.category == "coding"
    (line,) = scope["lines"]
    assert (line.id, line.line, line.answer.acceptance_length) == (7, 1, 2.99)
    profiles, sets, history = scope["held"]
    assert [p.acceptance_length for p in profiles] == [2.99]
    assert [s.name for s in sets] == ["inferencex-golden-al"] and history[0].revision == 1
    assert scope["verdict"] == "consistent"
    assert reg.engine.pool.checkedin() == 0  # the with block closed its engine


def test_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- ci: test-command -->" in README and "ci: test-command" in ci
    assert "python -m pytest" in _block_after("<!-- ci: test-command -->", "sh")
