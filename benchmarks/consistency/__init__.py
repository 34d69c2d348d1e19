"""The consistency benchmark (issue 36): ``python -m benchmarks.consistency``."""
