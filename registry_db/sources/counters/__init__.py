"""Engines' counters: what vLLM, ATOM, SGLang and TensorRT-LLM count while they serve, read as
counts of drafts and accepted tokens. Each engine's form is one module (:mod:`.vllm`,
:mod:`.vllm_bench`, :mod:`.vllm_log`, :mod:`.atom`, :mod:`.sglang`, :mod:`.trtllm`,
:mod:`.trtllm_metrics`); the Prometheus text they share is :mod:`.scrape`, the counts and checks
every engine shares :mod:`.common`, which engine an input came from :mod:`.detect` (``registry
check``), and what an input given to the wrong reader is :mod:`.forms`.
"""
