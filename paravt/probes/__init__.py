"""Probes of a checkpoint, each asking one question of it (``paravt probe ...``; the repro's probe gate reads them):

- ``perception``: do its answers follow the pixels? (an oracle crop against a grey one, answers forced from the
  overview at each K);
- ``calls``: can it write the parallel calls it decides to make? (the opening of a call turn forced, the rest
  greedy and sampled).
"""
