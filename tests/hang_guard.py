"""How long a test waits for a child process, a thread or an event before
calling it hung (imported as ``hang_guard``).

A guard against hangs, never a measure: a test's verdict must not depend on
how busy the machine is, so the limit is far above what any wait needs on a
loaded machine (the slowest child process, a benchmark or a model run, takes
a few minutes on two busy cores). Performance is measured by benchmarks/.
"""

HANG_GUARD_S = 900.0
