"""Policies testing themselves: scenario files and conformance tables (``privilog test``).

``scenario`` runs scenario files against a policy; ``conformance`` reads the
per-policy conformance tables, interprets them in plain Python and checks a
policy against them through the public API. Imports the API
(``privilog.api``), ``privilog.render`` and the layers below; no other room.
"""
