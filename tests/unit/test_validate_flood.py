"""`validate` of a flood of problems (issue 27.16): a 5 MB file with 300,000 unknown keys took
24.5 s and printed 300,000 lines. The findings shown are capped per file, the last one says how
many more there are, and no per-problem work past the cap (the nearest-key suggestion) is done.
"""

from __future__ import annotations

import difflib
import json

from registry_db.errors import MAX_FINDINGS_PER_FILE, Finding, cap_findings
from tests.helpers import run_cli

HEAD = ["kind: AcceptanceProfileSet", "name: big", "profiles:", "  - model: m",
        "    speculative_method: mtp", "    num_spec_tokens: 3", '    thinking: "on"',
        "    category: coding", "    acceptance_length: 2.5", "    method: assumed",
        "    rationale: r"]


def test_a_flood_of_unknown_keys_is_100_findings_and_a_count(tmp_path, monkeypatch):
    # 30,000 keys, not the 300,000: the cap, the count and the suggestions stopped at
    # the cap are the same rule at any size past 100, and this size reads in a second.
    path = tmp_path / "big.yaml"
    path.write_text("\n".join(HEAD + [f"    unk{i}: 1" for i in range(30_000)]) + "\n")
    suggested = []
    real = difflib.get_close_matches

    def counted(*args, **kwargs):
        suggested.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", counted)
    result = run_cli("validate", str(path))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == MAX_FINDINGS_PER_FILE + 2, lines[-3:]
    assert lines[-2].endswith("29,900 more problem(s) in this file are not shown (29,900 "
                              "error(s), 0 warning(s)); fix the first 100 and run again")
    assert lines[-1] == "100 error(s), 0 warning(s) shown; 1 file(s) have more, counted on " \
                        "their last line"
    # Each pass over the file (without positions, then with) suggests for the first keys only.
    assert len(suggested) <= 2 * MAX_FINDINGS_PER_FILE

    doc = json.loads(run_cli("validate", "--json", str(path)).stdout)
    assert doc["valid"] is False and len(doc["problems"]) == MAX_FINDINGS_PER_FILE + 1
    assert doc["problems"][-1]["code"] == "more_problems"


def test_a_flood_of_duplicate_keys_is_capped_too(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("\n".join(HEAD + ["    rationale: again"] * 1000) + "\n")
    result = run_cli("validate", str(path))
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == MAX_FINDINGS_PER_FILE + 2
    assert "901 more problem(s)" in result.stderr  # 1,000 duplicates and the name warning


def _f(file: str, line: int, severity: str = "error") -> Finding:
    return Finding(file, line, 1, "k", "unknown_key", "unknown key", severity)


def test_the_cap_is_per_file_and_counts_errors_and_warnings_apart():
    findings = ([_f("a.yaml", i) for i in range(1, 151)]
                + [_f("b.yaml", i, "warning") for i in range(1, 103)] + [_f("c.yaml", 1)])
    findings[120] = _f("a.yaml", 121, "warning")
    out = cap_findings(findings)
    by_file = {f: [x for x in out if x.file == f] for f in ("a.yaml", "b.yaml", "c.yaml")}
    assert [len(v) for v in by_file.values()] == [101, 101, 1]
    more_a, more_b = by_file["a.yaml"][-1], by_file["b.yaml"][-1]
    assert (more_a.code, more_a.line, more_a.severity) == ("more_problems", 101, "error")
    assert "50 more problem(s)" in more_a.message and "(49 error(s), 1 warning(s))" in \
        more_a.message
    assert more_b.severity == "warning" and "2 more problem(s)" in more_b.message
    assert cap_findings(findings[:100]) == findings[:100]
