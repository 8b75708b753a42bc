"""What an input is when it is not what the reader it was given reads: the forms the counter
sources know by the text only they hold, so that a refusal names the form it saw and the
command that reads it.
"""

from __future__ import annotations

#: (text only that form holds, what it is, the command that reads it or None and why not).
FORMS: tuple[tuple[str, str, str], ...] = (
    ("ray_vllm_spec_decode", "vLLM's counters as Ray Serve re-exports them "
     "(ray_vllm_spec_decode_*: Ray's metrics agent renames them and adds its own labels per "
     "replica)", "no reader takes Ray's export: scrape the vLLM server's own /metrics (the "
     "replica's port) and give that to `registry ingest vllm-metrics`"),
    ("SpecDecoding metrics: ", "vLLM's server log (its SpecDecoding metrics lines)",
     "read it with `registry ingest vllm-log` (`registry check --source vllm-log`)"),
    ('"spec_decode_num_drafts"', "a `vllm bench serve --save-result` JSON",
     "read it with `registry ingest vllm-bench` (`registry check --source vllm-bench`)"),
    ("atom:mtp_", "ATOM's /metrics scrape",
     "read it with `registry ingest atom-metrics` (`registry check --source atom`)"),
    ("atom_mtp_", "ATOM's /metrics scrape",
     "read it with `registry ingest atom-metrics` (`registry check --source atom`)"),
    ("vllm:spec_decode_num_", "vLLM's /metrics scrape",
     "read it with `registry ingest vllm-metrics` (`registry check --source vllm`)"),
)


def seen(text: str, own: tuple[str, ...]) -> str | None:
    """When ``text`` holds none of ``own`` (the reader's markers) but another form's, the
    sentence naming that form and the command that reads it; else None."""
    if any(marker in text for marker in own) and "ray_vllm_spec_decode" not in text:
        return None
    for marker, what, how in FORMS:
        if marker in text and marker not in own:
            return f"this is {what}; {how}"
    return None
