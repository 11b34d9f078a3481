"""The reviewed list of optim_db cases that fail on an Infini stack, each
with its reason (the host runtime has none: every case is bit-identical to
CPU there). ``test_optim_db.py`` marks them as expected failures on the
stack, not strictly: a build that refuses an operator they need skips them.
Keys are ``case_id``s.

Empty on InfiniOps 1f6f9c2 built WITH_TORCH=ON (InfiniRT a38977e, CPU
backend). LBFGS's five cases failed there while the native ``Add`` computed
``a + alpha * b`` with two roundings (the line search amplified them into
another trajectory); such calls now run on the ATen-backed ``Add``.
"""

STACK_KNOWN_FAILURES: dict[str, str] = {}
