"""The test suite, a package: helpers are imported by their full name from the repository
root (``from tests.gateway.gateway_harness import RunningGateway``), which pytest puts on
sys.path for a package's tests; scripts under tests/ run as ``python -m tests.perf.x`` or
``python tests/perf/x.py`` (which puts the root there itself)."""
