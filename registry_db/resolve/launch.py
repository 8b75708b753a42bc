"""What ``registry exec`` starts: a command and its environment with an engine's hand-off
applied, or a refusal when the command would run a K other than the resolved one.

Environment variables (SGLang, TensorRT-LLM, TileRT) are set over the caller's environment (a
command that sets one itself, ``env NAME=VALUE ...``, is refused).
vLLM's settings are merged into the command's own ``--speculative-config`` (``-sc``,
``--speculative_config``, or the ``=`` forms), keeping its ``method``, ``model`` and every other
key; without one, the merged object (into ``--into``'s, when given) is appended as
``--speculative-config JSON``. Arguments (ATOM, BLIS) are appended; one the command already
gives is kept when it says the same, refused otherwise. An engine's own K flag
(:attr:`~registry_db.resolve.engines.EngineRow.k_flags`) must name the resolved K.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from registry_db.errors import ResolutionRefused, UsageError
from registry_db.inputs.speculative_config import parse_speculative_config
from registry_db.model import RefusalReason
from registry_db.resolve.engines import ENGINES, EngineSettings

__all__ = ["command_with_handoff", "merged_config"]

#: vLLM's spellings of ``--speculative-config`` (vllm/engine/arg_utils.py adds ``-sc``; its
#: parser reads ``_`` as ``-``).
_CONFIG_FLAGS = ("--speculative-config", "-sc")
#: vLLM's shorthands that exclude ``--speculative-config`` (arg_utils.py).
_CONFIG_SHORTHANDS = ("--spec-method", "--spec-model", "--spec-tokens")
#: The keys the hand-off replaces: vLLM takes exactly one of the length and the rates.
_SYNTHETIC = ("synthetic_acceptance_length", "synthetic_acceptance_rates")


def merged_config(settings: EngineSettings, base: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's whole ``--speculative-config``: ``base`` with the hand-off merged in (its other
    keys kept, in order; a stale synthetic length or rates replaced). A ``num_speculative_tokens``
    in ``base`` other than the resolved K is refused (``k_mismatch``)."""
    ours = dict(settings.entries)
    k = ours["num_speculative_tokens"]
    given = base.get("num_speculative_tokens")
    if given is not None and (type(given) not in (int, float) or given != k):
        raise ResolutionRefused(
            RefusalReason.K_MISMATCH,
            f"the speculative config gives num_speculative_tokens {json.dumps(given)}, the "
            f"resolved acceptance is for K {k}")
    merged = {key: value for key, value in base.items() if key not in _SYNTHETIC}
    merged.update(ours)
    return merged


def command_with_handoff(settings: EngineSettings, argv: Sequence[str],
                         environ: Mapping[str, str], k: int, *,
                         into: Mapping[str, Any] | None = None,
                         ) -> tuple[list[str], dict[str, str]]:
    """``argv`` and ``environ`` with ``settings`` (for a resolution at ``k``) applied, as
    ``registry exec`` starts them; ``into`` is the object to merge vLLM's settings into when
    the command has no ``--speculative-config`` of its own.

    Raises :class:`~registry_db.errors.ResolutionRefused` (``k_mismatch``) when the command
    states another K, and :class:`~registry_db.errors.UsageError` when the command's own
    settings cannot be read or merged exactly (a malformed or repeated config, a conflicting
    flag).
    """
    argv, env = list(argv), dict(environ)
    row = ENGINES[settings.engine]
    for flag in row.k_flags:
        for _, _, value in _occurrences(argv, (flag,)):
            if _number(value) != k:
                raise ResolutionRefused(
                    RefusalReason.K_MISMATCH,
                    f"the command gives {flag} {value}, the resolved acceptance is for K {k}")
    if settings.form == "env":
        # `env NAME=VALUE cmd` inside the command would set its own value over ours.
        for arg in argv:
            name = arg.split("=", 1)[0]
            if "=" in arg and name in dict(settings.entries):
                raise UsageError(f"the command sets {name} itself ({arg}); the hand-off sets "
                                 f"it: drop it from the command")
        env.update(settings.entries)
    elif settings.form == "args":
        argv += _missing_args(argv, settings.args())
    else:
        argv = _with_config(argv, settings, into)
    return argv, env


def _missing_args(argv: list[str], ours: list[str]) -> list[str]:
    """Our flags the command does not give yet; one it gives with another value is refused."""
    out: list[str] = []
    for flag, value in zip(ours[::2], ours[1::2], strict=True):
        found = _occurrences(argv, (flag,))
        if not found:
            out += [flag, value]
        elif any(_number(given) != _number(value) for _, _, given in found):
            shown = ", ".join(given for _, _, given in found)
            raise UsageError(f"the command gives {flag} {shown}; the hand-off is {flag} {value}: "
                             f"drop it from the command")
    return out


def _with_config(argv: list[str], settings: EngineSettings,
                 into: Mapping[str, Any] | None) -> list[str]:
    for arg in argv[1:]:
        name = _name(arg)
        if any(name.startswith(flag + ".") for flag in _CONFIG_FLAGS):
            raise UsageError(f"the command gives {arg.split('=', 1)[0]}: give its speculative "
                             "config as one JSON object (--speculative-config JSON), which the "
                             "hand-off is merged into")
        if name in _CONFIG_SHORTHANDS:
            raise UsageError(f"the command gives {name}: give its speculative config as one "
                             "JSON object (--speculative-config JSON), which the hand-off is "
                             "merged into")
    found = _occurrences(argv, _CONFIG_FLAGS)
    if len(found) > 1:
        raise UsageError("the command gives --speculative-config more than once; give it once")
    if not found:
        merged = merged_config(settings, into or {})
        return [*argv, "--speculative-config", json.dumps(merged)]
    if into is not None:
        raise UsageError("the command gives its own --speculative-config, which the hand-off is "
                         "merged into: drop --into")
    (start, stop, text), = found
    base, problem = parse_speculative_config(text)
    if problem is not None:
        raise UsageError(f"the command's --speculative-config: {problem[2]}")
    flag = argv[start].split("=", 1)[0]
    return [*argv[:start], flag, json.dumps(merged_config(settings, base)), *argv[stop:]]


def _name(arg: str) -> str:
    """An argument's option name as the engines' parsers read it (``_`` as ``-``)."""
    name = arg.split("=", 1)[0]
    return name.replace("_", "-") if name.startswith("--") else name


def _occurrences(argv: list[str], flags: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """Where ``argv`` gives one of ``flags``: (start, stop, value) for ``--flag value`` and
    ``--flag=value``; a flag with no value after it is a usage error."""
    found = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if _name(arg) in flags:
            if "=" in arg:
                found.append((i, i + 1, arg.split("=", 1)[1]))
            elif i + 1 < len(argv):
                found.append((i, i + 2, argv[i + 1]))
                i += 1
            else:
                raise UsageError(f"the command gives {arg} without a value")
        i += 1
    return found


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text
