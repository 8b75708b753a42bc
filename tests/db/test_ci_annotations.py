"""``--format github`` on the commands a CI run gates on, on both backends: ``conflicts
--check`` (one annotation per key and set, on the file the set was imported from) and
``check`` (a drift or a refusal, on the scrape or on the batch file's line).

The lines follow GitHub's workflow commands as ``@actions/core`` writes them (actions/toolkit,
packages/core/src/command.ts, commit a944251692e50709e44d95e64d43c80236b9f6af):
``::error file=F,line=L,col=C,title=T::MESSAGE``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers import run_on, write_set

DATA = Path(__file__).resolve().parents[1] / "data" / "sources" / "vllm"
ANNOTATION_RE = re.compile(r"^::(error|warning)(?: [a-z]+=[^,:]*(?:,[a-z]+=[^,:]*)*)?::[^\r\n]*$")
ON_CODING = ("--model", "example-model", "--method", "eagle3", "--k", "3", "--thinking", "on",
             "--category", "coding")
SET = """kind: AcceptanceProfileSet
name: golden
profiles:
  - model: example-model
    speculative_method: eagle3
    num_spec_tokens: 3
    thinking: "on"
    category: coding
    acceptance_length: 3.84
    counts: {drafts: 84142, draft_tokens: 252426, accepted_tokens: 238963}
    method: measured
    provenance:
      source: https://example.org/golden
      hardware: b300
      engine_image: vllm:1
      sampling: {temperature: 0.6}
"""


def test_conflicts_check_annotates_each_sets_file(db_url, tmp_path):
    one, two = write_set(tmp_path, "one", 1, model="m"), write_set(tmp_path, "two", 1, model="m")
    assert run_on(db_url, "import", str(tmp_path)).exit_code == 0
    result = run_on(db_url, "conflicts", "--check", "--format", "github")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert all(ANNOTATION_RE.match(line) for line in lines), lines
    message = ("profile m/mtp/k3/thinking-on/cat0 is held by sets one, two; the resolver "
               "refuses it, so keep it in one set")
    assert lines == [f"::error file={one},title=conflict::{message}",
                     f"::error file={two},title=conflict::{message}"]
    assert result.stderr == "1 conflicting profile key(s)\n"
    listed = run_on(db_url, "conflicts", "--format", "github")
    assert listed.exit_code == 0 and listed.stdout.startswith("::warning ")
    assert run_on(db_url, "conflicts", "--json", "--format", "github").exit_code == 2


def test_conflicts_check_prints_nothing_when_clean(db_url):
    result = run_on(db_url, "conflicts", "--check", "--format", "github")
    assert (result.exit_code, result.stdout) == (0, "")


def test_check_annotates_a_drift_on_the_scrape(db_url, tmp_path):
    (tmp_path / "golden.yaml").write_text(SET)
    assert run_on(db_url, "import", str(tmp_path / "golden.yaml")).exit_code == 0
    drifted = str(DATA / "drifted.prom")
    result = run_on(db_url, "check", drifted, *ON_CODING, "--format", "github")
    assert result.exit_code == 1
    glance, note = result.stdout.splitlines()
    assert note == f"::error file={drifted},title=drift::{glance}"
    assert "drift, z = " in glance


def test_check_batch_annotates_the_lines_that_fail(db_url, tmp_path):
    (tmp_path / "golden.yaml").write_text(SET)
    assert run_on(db_url, "import", str(tmp_path / "golden.yaml")).exit_code == 0
    run = {"model": "example-model", "method": "eagle3", "k": 3, "thinking": "on",
           "category": "coding"}
    good = {"drafts": 84142, "draft_tokens": 252426, "accepted_tokens": 238963}
    bad = {"drafts": 12000, "draft_tokens": 36000, "accepted_tokens": 4800}
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join([json.dumps({**run, "counts": good}), "",
                               json.dumps({**run, "counts": bad}),
                               json.dumps({**run, "category": "math", "counts": good})]) + "\n")
    result = run_on(db_url, "check", "--batch", str(path), "--format", "github")
    assert result.exit_code == 1
    notes = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert [n.split("::")[1] for n in notes] == [f"error file={path},line=3,title=drift",
                                                 f"error file={path},line=4,title=refused"]
