"""The benchmarks: each module runs with `python -m benchmarks.NAME` from the repository root (BENCHMARKS.md has
their numbers). They build what they measure through the project's public constructors."""
