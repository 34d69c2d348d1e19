"""Policies shipped with privilog: one file per policy version, and the prelude they share."""
