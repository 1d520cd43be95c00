"""Verifier adapters behind one result contract (`verifiers.result`)."""
