"""Batch integrity under hostile input: one answer per ``\\n``-terminated line, in place.

Every line gets exactly one answer, in order, whatever it holds: Unicode line separators inside
JSON strings, control characters, a line nested 100,000 deep, a lone surrogate, a NUL. A bad
line is answered ``invalid_request`` where it stands and the lines after it still get theirs.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from registry_db.cli.group import main
from registry_db.importing import write as importer
from tests.helpers import SEED

GOOD = {"model": "deepseek-v4.1-flash", "method": "dspark", "k": 5, "thinking": "off",
        "category": "coding"}
OTHER = {"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "coding"}


@pytest.fixture
def url(db_url, engine):
    importer.import_paths(engine, [SEED])
    return db_url


def batch(url: str, data: bytes, tmp_path) -> tuple[int, list[dict]]:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(data)
    result = CliRunner().invoke(main, ["-d", url, "resolve", "--batch", str(path)])
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, [json.loads(a) for a in result.stdout.split("\n")[:-1]]


def line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"


#: Characters str.splitlines() breaks on, that may stand inside a valid JSON string.
VALID_INSIDE_STRINGS = ["\u2028", "\u2029", "\u0085"]
#: Control characters str.splitlines() breaks on; raw, JSON refuses them inside a string.
CONTROL = ["\x1c", "\x1d", "\x1e", "\x0b", "\x0c"]


@pytest.mark.parametrize("sep", VALID_INSIDE_STRINGS, ids=lambda s: f"U+{ord(s):04X}")
def test_unicode_line_separators_inside_strings_do_not_split(url, tmp_path, sep):
    odd = dict(GOOD, model=f"deepseek{sep}v4.1-flash")
    code, answers = batch(url, line(GOOD) + line(odd) + line(OTHER), tmp_path)
    assert len(answers) == 3
    assert answers[0]["profile_set"] == "inferencex-golden-al"
    assert answers[1]["refused"]["reason"] == "no_match"
    assert sep in answers[1]["refused"]["message"]
    assert answers[2]["profile"] == "glm-5.3/mtp/k3/thinking-on/coding"
    assert code == 0


@pytest.mark.parametrize("sep", CONTROL, ids=lambda s: f"0x{ord(s):02x}")
def test_control_characters_do_not_split(url, tmp_path, sep):
    # Raw in the file (json.dumps would escape it): JSON refuses it, on that line alone.
    bad = json.dumps(dict(GOOD, model="deepseek|v4.1-flash")).replace("|", sep).encode() + b"\n"
    code, answers = batch(url, line(GOOD) + bad + line(OTHER), tmp_path)
    assert len(answers) == 3
    assert answers[1]["refused"]["reason"] == "invalid_request"
    assert answers[1]["refused"]["message"].startswith("line 2:")
    assert answers[2]["profile"] == "glm-5.3/mtp/k3/thinking-on/coding"
    assert code == 1


def test_carriage_return_alone_does_not_split(url, tmp_path):
    # JSON whitespace, between tokens; universal newlines would make it a line break.
    text = json.dumps(GOOD).replace(", ", ",\r", 1).encode() + b"\n" + line(OTHER)
    code, answers = batch(url, text, tmp_path)
    assert [a.get("profile_set") for a in answers] == ["inferencex-golden-al"] * 2
    assert code == 0


def test_crlf_lines_are_lines(url, tmp_path):
    text = line(GOOD)[:-1] + b"\r\n" + line(OTHER)[:-1] + b"\r\n"
    code, answers = batch(url, text, tmp_path)
    assert len(answers) == 2 and code == 0


def test_deeply_nested_line_is_answered_in_place(url, tmp_path):
    deep = b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    code, answers = batch(url, line(GOOD) + deep + line(OTHER), tmp_path)
    assert len(answers) == 3
    assert answers[1]["refused"]["reason"] == "invalid_request"
    assert "nested" in answers[1]["refused"]["message"]
    assert answers[2]["profile"] == "glm-5.3/mtp/k3/thinking-on/coding"
    assert code == 1


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "\\u0000"])
@pytest.mark.parametrize("field", ["model", "category", "sets"])
def test_lone_surrogate_and_nul_are_answered_in_place(url, tmp_path, escape, field):
    value = "x" + escape
    raw = json.dumps(GOOD)[:-1] + (f', "sets": ["{value}"]}}' if field == "sets" else "}")
    if field != "sets":
        raw = raw.replace(f'"{GOOD[field]}"', f'"{value}"')
    code, answers = batch(url, line(GOOD) + raw.encode() + b"\n" + line(OTHER), tmp_path)
    assert len(answers) == 3
    assert answers[1]["refused"]["reason"] == "invalid_request"
    assert answers[0]["profile_set"] == answers[2]["profile_set"] == "inferencex-golden-al"
    assert code == 1
