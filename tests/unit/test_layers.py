"""The run's inputs and the layers are two tables (registry_db.inputs.layers); the request, the
batch line, the command's options and the precedence are derived from them. These tests hold the
derivations to the contract, so that a row added to a table shows up everywhere or fails here."""

from __future__ import annotations

import dataclasses

import click

from registry_db.cli.resolve import resolve as resolve_command
from registry_db.inputs import layers
from registry_db.inputs.request import Request, parse_line, request_from_json
from registry_db.model import InlineValue, Layer, Refusal, RefusalReason


def test_every_input_is_a_request_field_in_order():
    assert [row.name for row in layers.INPUTS] == [f.name for f in dataclasses.fields(Request)]


def test_batch_keys_are_the_contracts():
    """contract.md: model, method, k, and optionally thinking, category, acceptance, pin, cli,
    hardware and sets; and (second round) "id", echoed in the answer; (issue 13) "as_of"."""
    assert list(layers.BATCH_KEYS) == ["model", "method", "k", "thinking", "category",
                                       "acceptance", "pin", "cli", "hardware", "sets", "as_of",
                                       "id"]
    assert layers.REQUIRED_KEYS == ("model", "method", "k")


def test_layers_in_the_specs_precedence():
    assert [row.layer for row in layers.LAYERS] == list(Layer) == [
        "registry", "workload", "scenario", "cli"]
    stated = {row.layer: row.input for row in layers.LAYERS}
    assert {layer: layers.STATED[layer].name for layer in layers.STATED} == {
        layer: name for layer, name in stated.items() if name is not None}


def test_every_flag_of_the_table_is_an_option_of_resolve():
    options = {p.name: p for p in resolve_command.params if isinstance(p, click.Option)}
    for flag in layers.FLAGS:
        assert flag.decl in options[flag.name].opts
    # Beside the run's flags: how many runs, and what the answer becomes (the engine's hand-off,
    # merged into a config, inexact on request).
    assert set(options) == {f.name for f in layers.FLAGS} | {
        "batch", "as_json", "deployment", "emit", "shell", "into", "allow_inexact"}


def test_a_batch_line_reads_every_row():
    line = {"model": "m", "method": "mtp", "k": 3, "thinking": "on", "category": "coding",
            "acceptance": {"num_spec_tokens": 3, "acceptance_length": 2.0},
            "pin": {"fallback_category": "chat"},
            "cli": {"num_spec_tokens": 3, "acceptance_rate": 0.5},
            "hardware": "b300", "sets": ["a", "b"]}
    request = request_from_json(line)
    assert request == Request("m", "mtp", 3, "on", "coding", InlineValue(3, 2.0),
                              layers.STATED[Layer.SCENARIO].schema.build(
                                  {"profiles": None, "value": None,
                                   "fallback_category": "chat"}),
                              InlineValue(3, acceptance_rate=0.5), "b300", ("a", "b"))


def test_batch_parsing_returns_refusals_as_values():
    found = parse_line('{"model": "m", "method": "mtp"}', 7)
    assert found == Refusal(RefusalReason.INVALID_REQUEST, "line 7: k is required (integer)")
    assert found.to_json() == {"refused": {"reason": "invalid_request",
                                           "message": "line 7: k is required (integer)"}}


def test_repeated_lines_are_read_once_and_refusals_keep_their_line():
    """A line repeated word for word is the same request (one object); a repeated refused line
    still names its own line number, and a line that differs only in its id is its own."""
    from registry_db.inputs.request import parse_lines

    good = '{"model": "m", "method": "mtp", "k": 3, "thinking": "off", "category": "chat"}'
    bad = '{"model": "m", "method": "mtp"}'
    other = good[:-1] + ', "id": 2}'
    found = parse_lines([good, bad, "", good, bad, other, good])
    assert found[0] is found[2] is found[5]
    assert found[0] == parse_line(good, 1)
    assert [f.message.split(":")[0] for f in (found[1], found[3])] == ["line 2", "line 5"]
    assert found[4].id == 2 and found[4] is not found[0]


def test_a_good_shape_remembered_still_lets_no_bad_line_through():
    """The batch line check remembers shapes (keys and value types) it found good; a line of
    another shape, however close, is checked in full."""
    good = {"model": "m", "method": "mtp", "k": 3, "thinking": "off", "category": "chat"}
    assert type(request_from_json(dict(good))) is Request
    assert type(request_from_json(dict(good))) is Request  # the remembered shape
    for bad in ({**good, "k": True}, {**good, "k": 3.0}, {**good, "model": None},
                {k: v for k, v in good.items() if k != "method"}, {**good, "modle": "m"},
                {**good, "sets": ["a", 1]}, {**good, "sets": "a"}):
        found = request_from_json(bad)
        assert type(found) is Refusal and found.reason == RefusalReason.INVALID_REQUEST, bad
    assert type(request_from_json({**good, "sets": ["a"]})) is Request
    assert type(request_from_json({**good, "sets": ["a", 2]})) is Refusal  # items still checked
