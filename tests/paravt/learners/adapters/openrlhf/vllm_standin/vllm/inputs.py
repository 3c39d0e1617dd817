"""``vllm.inputs``: ``TokensPrompt`` is a ``TypedDict`` in vLLM, a plain dict at run time."""

TokensPrompt = dict
