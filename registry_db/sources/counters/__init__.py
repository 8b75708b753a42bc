"""Engines' counters: what vLLM, ATOM, SGLang and TensorRT-LLM count while they serve, read as
counts of drafts and accepted tokens. Each engine is one module (:mod:`.vllm`, :mod:`.atom`,
:mod:`.sglang`, :mod:`.trtllm`); the Prometheus text they share is :mod:`.scrape`, the counts
and checks every engine shares :mod:`.common`, and which engine an input came from
:mod:`.detect` (``registry check``).
"""
