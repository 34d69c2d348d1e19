"""Rendering: decisions, listings, policy comparisons and proofs as text and JSON.

Shared by the applications (the command line, the REPL, scenarios, ``prove``):
it imports only the layers below (``dsl``, ``engine``, ``proofs``), never the
API's callers or another room of ``privilog``.
"""
