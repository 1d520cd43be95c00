"""The embedded Z3 verifier for C: Horn clauses + Spacer, BMC, candidate checks.

Import what you need from `verifiers.z3c.api`; run it as
``python -m veribatch.verifiers.z3c FILE --timeout S --json`` (see README.md here).
"""
