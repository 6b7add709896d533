"""Pure judgement rules: the pass rule, timing statistics and sanity, peaks, throttling, the gate,
and the verdict on a case's outcome. No GPU, no pytest: tested on recorded data.
"""
