"""The schema interpreter's bookkeeping: the count of errors it reads before and after every
mapping, kept as findings are added (only the new ones counted), and the set test of known
keys, which must let exactly the unknown keys through to be reported."""

from __future__ import annotations

from registry_db.inputs.schema import Checker, Field, Map


def test_error_count_follows_the_findings():
    ck = Checker("f.yaml")
    assert ck.errors == 0
    ck.error((1, 1), "a", "x", "first")
    ck.error((2, 1), "b", "y", "a warning", severity="warning")
    assert ck.errors == 1
    ck.error((3, 1), "c", "z", "second")
    assert ck.errors == 2 and ck.errors == 2  # asked twice: counted once
    ck.findings = ck.findings[1:2]  # cut down to the warning: counted again from the start
    assert ck.errors == 0
    ck.findings.append(ck.findings[0])
    assert ck.errors == 0


def test_only_unknown_keys_are_reported():
    schema = Map("thing", (Field("a", "string"), Field("b", "integer", required=False)))
    ck = Checker("f.yaml")
    assert schema.read(ck, {"a": "x", "b": 2}, "thing") == {"a": "x", "b": 2}
    assert ck.findings == []
    schema.read(ck, {"a": "x", "bb": 2, 3: "y"}, "thing")
    assert [(f.path, f.code) for f in ck.findings] == [
        ("thing.bb", "unknown_key"), ("thing.3", "unknown_key")]
    assert "did you mean 'b'?" in ck.findings[0].message
