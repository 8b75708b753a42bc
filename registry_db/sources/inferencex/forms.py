"""The line forms of an InferenceX golden AL file's header: one row per form, a new form is one
row.

Each row of :data:`FORMS` is a form of line that InferenceX's collectors (or the people who
edited their output) write: its pattern and the field each group fills, and for a line holding a
list (``name: value | ...``, ``(B300, vLLM MTP, draft: X)``, a JSON block) the reader of that
list with its own table (:data:`ITEMS`, :data:`KEYS`). The fields are the spec's provenance
(:data:`registry_db.sources.inferencex.facts.FIELDS`). ``tests/unit/test_source_inferencex_real.py``
tests each row on the real line it was made for, naming the file and commit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from registry_db.sources.inferencex.header import (
    Form,
    Header,
    ListReader,
    counters,
    items,
    json_block,
    mode_pairs,
    name_value,
    pairs,
    read_lines,
)

__all__ = ["FORMS", "ITEMS", "KEYS", "SPECULATIVE", "read_header"]

#: The engines a "Measured on" item names before the method (``vLLM EAGLE3``).
_ENGINES = "vLLM|SGLang|TRT-LLM|TensorRT-LLM|ATOM"
_BENCH = r"[A-Z][\w-]*(?: [A-Z][\w-]*)*"   # capitalised words: SPEED-Bench Qualitative
_CAT = r"[a-z0-9_-]+"


def read_header(text: str, file: str) -> Header:
    """Read the header of one file's ``text`` (without a BOM) by :data:`FORMS`."""
    return read_lines(text, file, FORMS)


# --- the tables ----------------------------------------------------------------------------------

#: The names the headers give fields, in ``name: value`` lists, ``name=value`` items and the
#: JSON block (``@on``: that thinking mode only). A name not here is a warning at its line.
KEYS: dict[str, str] = {
    "dataset": "category", "CATEGORY": "category",
    "temperature": "sampling.temperature", "temp": "sampling.temperature",
    "top_p": "sampling.top_p", "top_k": "sampling.top_k", "output_len": "sampling.max_tokens",
    "max_tokens": "sampling.max_tokens", "SPEEDBENCH_OUTPUT_LEN": "sampling.max_tokens",
    "image": "engine_image", "IMAGE": "engine_image", "TP": "tp", "method": "method",
    "Draft model": "draft_model",
    # the served model's own name and revision: the profile's model is the catalog's
    "model": "settings.target_model", "MODEL": "settings.target_model",
    "MODEL_REVISION": "settings.target_revision", "PRECISION": "settings.precision",
    "chat_template_kwargs": "settings.chat_template_kwargs",
    "CHAT_TEMPLATE_KWARGS_ON": "settings.chat_template_kwargs@on",
    "CHAT_TEMPLATE_KWARGS_OFF": "settings.chat_template_kwargs@off",
    "SPEEDBENCH_SPECULATIVE_CONFIG": "speculative_config",
    "SPEEDBENCH_SEED": "settings.seed", "SPEEDBENCH_CONCURRENCY": "settings.concurrency",
    "SPEEDBENCH_PREPARE_REVISION": "settings.speedbench_prepare_revision",
    "Prepared dataset SHA256": "settings.prepared_dataset_sha256",
    "target weights": "settings.target_weights", "target KV cache": "settings.target_kv_cache",
    "MTP_LIST": "ks", "THINKING_MODES": "modes",
    **{name: f"settings.{name}" for name in (
        "presence_penalty", "frequency_penalty", "repetition_penalty", "min_p", "seed",
        "concurrency", "context", "draft_sample_method", "rejection_sample_method",
        "enable_adaptive_verification", "engram cpu_offload", "draft_snapshot")},
}
#: A speculative config's names; any other is a setting under its own name (vLLM's keys).
SPECULATIVE = {"method": "method", "model": "draft_model", "revision": "settings.draft_revision"}


def _form(name: str, pattern: str, fills: Mapping[str, str] | None = None,
          rest: tuple[str, ListReader] | None = None, starts: str | None = None) -> Form:
    return Form(name, re.compile(pattern), fills or {}, rest,
                re.compile(starts) if starts else None)


#: What an item of a list holds (``Measured on m (B300, TP4, vLLM MTP, draft: X)``,
#: ``Image: IMAGE; H200; TP=1; ...``): each matches the item whole.
ITEMS: tuple[Form, ...] = (
    _form("chip", r"(?P<hardware>[A-Z]{1,3}[0-9]{2,4}[A-Z]?)", {"hardware": "hardware"}),
    _form("tp", r"TP\s*=?\s*(?P<tp>[0-9]+)", {"tp": "tp"}),
    _form("engine release and method", rf"(?P<engine_image>(?:{_ENGINES}) [0-9]\S*)"
          r"(?: native)? (?P<method>[A-Za-z]\S*)",
          {"engine_image": "engine_image", "method": "method"}),
    _form("engine and method", rf"(?:{_ENGINES})(?: native)? (?P<method>[A-Za-z]\S*)",
          {"method": "method"}),
    _form("draft", r"draft: (?P<draft_model>\S+)", {"draft_model": "draft_model"}),
    _form("prompts", r"all (?P<prompts>[0-9]+) requests succeeded(?: in every cell)?",
          {"prompts": "prompts"}),
    _form("output length", r"maximum output length (?P<max_tokens>[0-9]+)",
          {"max_tokens": "sampling.max_tokens"}),
    _form("run of a mode", r"thinking_(?P<mode>on|off) (?P<run>\S+)", {"run": "run"}),
    _form("name=value", r"(?P<name>[A-Za-z_]+)=(?P<value>\S+)",
          rest=("name", name_value(KEYS))),
)

#: Every line form, first match wins. The real line each was read from: docs/inferencex.md.
FORMS: tuple[Form, ...] = (
    _form("run", r"Source (?:GitHub Actions )?run:\s*(?P<run>\S+)$", {"run": "run"}),
    _form("run per mode", r"Source GitHub Actions runs:\s*(?P<runs>.+)$",
          rest=("runs", items(";", ITEMS))),
    _form("evidence", r"Source evidence:\s*(?P<run>\S+)$", {"run": "run"}),
    _form("lengths refused", r"(?P<caveat>Draft lengths? [0-9][0-9 ,-]* (?:rejected|refused) .+)$",
          {"caveat": "caveat"}),
    _form("benchmark", r"Acceptance Length \(AL\)(?: reference values)? measured with "
          rf"(?P<benchmark>{_BENCH})(?: (?P<category>{_CAT}))?\.$",
          {"benchmark": "benchmark", "category": "category"}),
    _form("benchmark and cells", rf"(?P<benchmark>{_BENCH}) (?P<category>{_CAT}); "
          r"(?P<items>.+?)\.?$", {"benchmark": "benchmark", "category": "category"},
          rest=("items", items(";", ITEMS))),
    _form("workload", rf"(?P<category>{_CAT}), (?P<prompts>[0-9]+) successful requests, "
          r"(?P<max_tokens>[0-9]+) maximum output tokens\.$",
          {"category": "category", "prompts": "prompts", "max_tokens": "sampling.max_tokens"}),
    _form("counts", r"thinking_(?P<mode>on|off) k=(?P<k>[0-9]+): (?P<counts>.+)$",
          rest=("counts", counters)),
    _form("thinking mode", r"thinking_(?P<mode>on|off)(?![A-Za-z0-9_])\s*:?\s*(?P<pairs>.*?)\.?$",
          rest=("pairs", mode_pairs(KEYS))),
    _form("speculative-config", r"speculative-config\s*:\s*(?P<pairs>.*)$",
          rest=("pairs", pairs(r"\|", SPECULATIVE, other="settings."))),
    _form("measured on", r"Measured on (?P<model>\S+) \((?P<items>[^)]*)\)"
          r"(?:,? per num_speculative_tokens)?\.?$", {"model": "model"},
          rest=("items", items("[,;]", ITEMS)), starts=r"Measured on "),
    _form("key", r"key = num_speculative_tokens(?: \((?P<method>\S+) level\))?"
          r"(?:; value = golden AL|; AL includes the target verification token\.)$",
          {"method": "method"}),
    _form("image", r"(?:[Ee]ngine[_ ]image|[Ii]mage)\s*:\s*(?P<engine_image>[^\s;|]+)"
          r"(?:;\s*(?P<items>.+?))?\.?$", {"engine_image": "engine_image"},
          rest=("items", items(";", ITEMS))),
    _form("target", r"Target: (?P<target>\S+) @ (?P<revision>[^\s;]+)(?:; (?P<pairs>.+?))?\.?$",
          {"target": "settings.target_model", "revision": "settings.target_revision"},
          rest=("pairs", pairs(";", KEYS))),
    _form("MTP head", r"Native (?P<method>MTP) head: (?P<draft>\S+) @ (?P<revision>[^\s;]+)"
          r"(?:; (?P<weights>.+?))?\.?$",
          {"method": "method", "draft": "draft_model", "revision": "settings.draft_revision",
           "weights": "settings.draft_weights"}),
    _form("JSON block", r"(?P<json>\{.*\})$", rest=("json", json_block(KEYS, SPECULATIVE)),
          starts=r"\{$"),
    # Read, and nothing to record: SGLang's counters without the drafted tokens (counts need
    # them), where the curve was collected by, what the format's comments mean.
    _form("AL formula", r"AL = 1 \+ sum\(.+\) / sum\(.+\)$"),
    _form("AL arithmetic", r"= 1 \+ [0-9]+ / [0-9]+ = [0-9.]+ -> [0-9.]+$"),
    _form("collector", r"(?:Auto-generated by|Collector:) \S+.*$"),
    _form("format notes", r"(?:AL includes the bonus token|Counter comments retain) .+$"),
    _form("inherited", r"Inherited value provenance \(.+\):$"),
    _form("name: value list", r"(?P<pairs>[^:|]+:\s*\S.*)$", rest=("pairs", pairs(r"\|", KEYS))),
)
