"""Policies testing themselves: scenario files and conformance tables (``privilog test``).

``scenario`` runs scenario files against a policy; ``table`` reads the
per-policy conformance tables and interprets them in plain Python (the oracle of
the property tests); ``conformance`` checks a policy against its table through
the public API and reports. Imports the API (``privilog.api``),
``privilog.render`` and the layers below; no other room.
"""
