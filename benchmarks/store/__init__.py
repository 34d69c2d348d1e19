"""The grant store benchmark (issue 14): ``python -m benchmarks.store``."""
