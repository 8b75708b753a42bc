"""A run's counts from any counter source, for ``registry check``: which engine's counters an
input holds, read by that source's own ``measure`` (the reader ``registry ingest`` uses).

An input is read once (a URL is fetched once, ``-`` read once) and handed to the source as
text; each source module names the text only its output holds (``MARKERS``).
"""

from __future__ import annotations

import importlib
from typing import Any

from registry_db.errors import InvalidInput, UsageError
from registry_db.sources.counters.common import Measured, label, problem, read_input

__all__ = ["COUNTER_SOURCES", "detect", "measure_run"]

#: ``registry check --source`` names -> the counter source's module (its ``measure``,
#: ``MARKERS`` and ``WHAT``), in the order the input is tried.
COUNTER_SOURCES: dict[str, str] = {
    "vllm": "registry_db.sources.counters.vllm",
    "atom": "registry_db.sources.counters.atom",
    "sglang": "registry_db.sources.counters.sglang",
    "trtllm": "registry_db.sources.counters.trtllm",
    "trtllm-metrics": "registry_db.sources.counters.trtllm_metrics",
    "vllm-bench": "registry_db.sources.counters.vllm_bench",
    "vllm-log": "registry_db.sources.counters.vllm_log",
}


def _module(name: str) -> Any:
    return importlib.import_module(COUNTER_SOURCES[name])


def detect(file: str, text: str) -> str:
    """The counter source whose counters ``text`` holds; :class:`InvalidInput` naming what was
    looked for when none (or several) do."""
    from registry_db.sources.counters.forms import seen

    found = [name for name in COUNTER_SOURCES
             if any(marker in text for marker in _module(name).MARKERS)]
    if "ray_vllm_spec_decode" in text and found == ["vllm"]:
        # Ray's re-export holds vLLM's names inside its own: not vLLM's scrape
        message = seen(text, ())
        assert message is not None
        raise InvalidInput([problem(file, 0, "", "another_form", message)])
    if len(found) == 1:
        return found[0]
    if found:
        message = (f"the input holds the counters of {' and '.join(found)}; give --source to "
                   "say which to read")
    else:
        looked = "; ".join(f"{name}: {_shown(_module(name).MARKERS[0])}"
                           for name in COUNTER_SOURCES)
        message = (f"no counter source's counters are in it (looked for {looked}); is "
                   "speculative decoding on? Give --source NAME for that reader to say what "
                   "is missing")
    raise InvalidInput([problem(file, 0, "", "unknown_counters", message)])


def _shown(marker: str) -> str:
    return marker + "..." if marker.endswith("_") else marker  # a prefix of the counters


def measure_run(after: str, before: str | None, k: int, *, source: str | None = None,
                model_name: str | None = None) -> tuple[str, Measured]:
    """The counter source (``source``, else the one AFTER holds) and the run's counts, read by
    that source's ``measure`` at K ``k``: AFTER and BEFORE are files, ``-`` or ``http(s)://``
    URLs; ``model_name`` picks a served model of a vLLM scrape. Raises :class:`InvalidInput`
    (FILE:LINE) for an input that is not the run's counters, :class:`UsageError` for an
    option the source does not take."""
    if source is not None and source not in COUNTER_SOURCES:
        raise UsageError(f"--source {source!r} is not a counter source; choose one of "
                         f"{', '.join(COUNTER_SOURCES)}")
    if after == "-" and before == "-":
        raise UsageError("AFTER and --before cannot both be - (stdin holds one scrape)")
    text = read_input(after)
    name = source if source is not None else detect(label(after), text)
    options: dict[str, Any] = {}
    if model_name is not None:
        if name != "vllm":
            raise UsageError(f"--model-name picks a served model of vLLM's scrape; the {name} "
                             "counters have no model names")
        options["model_name"] = model_name
    return name, _module(name).measure(after, before, k, text=text, **options)
