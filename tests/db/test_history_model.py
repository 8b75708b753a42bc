"""The history against an independent model: random imports, deletes and restores, then every
as-of answer compared (hypothesis, stateful), on both backends.

The model is a list of revisions per set (its time, as the registry reports it, and its content:
which categories at which AL, or deleted), written without the registry's code. After each step,
at every revision's time, a microsecond before it and far ahead, ``history.held`` (what show,
profiles and export read) and the resolver (one batch per check) must answer what the model says
the set held then: the latest revision stamped at or before the time, unless it is a deletion.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from registry_db import history
from registry_db.errors import NotFound
from registry_db.importing import restore
from registry_db.importing import write as importer
from registry_db.model import Refusal
from registry_db.resolve.plan import Request, resolve_many

CATEGORIES = (0, 1, 2)
NAMES = ("s0", "s1")
FAR = datetime(2100, 1, 1, tzinfo=UTC)
US = timedelta(microseconds=1)
_runs = itertools.count()

#: A set's content: (the categories it holds, their AL); None: deleted.
contents = st.tuples(st.frozensets(st.sampled_from(CATEGORIES), min_size=1),
                     st.sampled_from((2.0, 2.5, 3.0)))


def _yaml(name: str, model: str, content) -> str:
    """A set holding the content's categories (cat<i>), each at its AL."""
    cats, al = content
    lines = ["kind: AcceptanceProfileSet", f"name: {name}", "profiles:"]
    for c in sorted(cats):
        lines += [f"  - model: {model}", "    speculative_method: mtp", "    num_spec_tokens: 3",
                  '    thinking: "on"', f"    category: cat{c}", f"    acceptance_length: {al}",
                  "    method: assumed", "    rationale: a model-based test"]
    return "\n".join(lines) + "\n"


def _machine(engine, folder):
    class History(RuleBasedStateMachine):
        @initialize()
        def start(self):
            run = next(_runs)  # each example its own sets and models: the database is shared
            self.names = {n: f"r{run}-{n}" for n in NAMES}
            self.models = {n: f"m{run}-{n}" for n in NAMES}
            self.revs: dict[str, list[tuple[datetime, object]]] = {n: [] for n in NAMES}

        def _current(self, n):
            return self.revs[n][-1][1] if self.revs[n] else None

        def _recorded(self, n, content) -> None:
            """A write happened: the new revision is the next number, and stamped later."""
            [latest, *_] = history.history(engine, self.names[n])
            assert latest.revision == len(self.revs[n]) + 1
            if self.revs[n]:
                assert latest.imported_at > self.revs[n][-1][0]
            self.revs[n].append((latest.imported_at, content))

        @rule(n=st.sampled_from(NAMES), content=contents)
        def import_(self, n, content):
            path = folder / f"{self.names[n]}.yaml"
            path.write_text(_yaml(self.names[n], self.models[n], content))
            importer.import_paths(engine, [path])
            if self._current(n) != content:
                self._recorded(n, content)

        @precondition(lambda self: any(self._current(n) is not None for n in NAMES))
        @rule(data=st.data())
        def delete(self, data):
            n = data.draw(st.sampled_from([n for n in NAMES if self._current(n) is not None]))
            history.delete_sets(engine, [self.names[n]])
            self._recorded(n, None)

        @precondition(lambda self: any(c for n in NAMES for _, c in self.revs[n]))
        @rule(data=st.data())
        def restore_(self, data):
            n = data.draw(st.sampled_from([n for n in NAMES
                                           if any(c for _, c in self.revs[n])]))
            number = data.draw(st.sampled_from([i + 1 for i, (_, c) in enumerate(self.revs[n])
                                                if c is not None]))
            content = self.revs[n][number - 1][1]
            restore.restore(engine, self.names[n], number)
            if self._current(n) != content:
                self._recorded(n, content)

        def _model_at(self, n, at):
            held = [c for t, c in self.revs[n] if t <= at]
            return held[-1] if held else None

        @invariant()
        def as_of_answers_match_the_model(self):
            if not hasattr(self, "revs"):
                return
            times = {t + d for n in NAMES for t, _ in self.revs[n] for d in (-US, 0 * US)}
            probes = sorted(times | {FAR})
            requests, expected = [], []
            for n in NAMES:
                for at in probes:
                    content = self._model_at(n, at)
                    try:
                        [found] = history.held(engine, [self.names[n]], as_of=at)
                        got = (frozenset(int(p.category[3:]) for p in found.set.profiles),
                               {p.acceptance_length for p in found.set.profiles})
                    except NotFound:
                        got = None
                    want = None if content is None else (content[0], {content[1]})
                    assert got == want, (n, at)
                    for cat in CATEGORIES:
                        requests.append(Request(self.models[n], "mtp", 3, "on", f"cat{cat}",
                                                as_of=at))
                        expected.append(content[1] if content and cat in content[0] else None)
            answers = resolve_many(engine, requests)
            got = [None if isinstance(a, Refusal) else a.acceptance_length for a in answers]
            assert got == expected

    return History


def test_as_of_answers_equal_an_independent_model(engine, tmp_path):
    """Random imports (new, changed, unchanged), deletes and restores of two sets."""
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(_machine(engine, tmp_path), settings=settings(
        max_examples=10, stateful_step_count=8, deadline=None,
        suppress_health_check=[HealthCheck.too_slow]))
