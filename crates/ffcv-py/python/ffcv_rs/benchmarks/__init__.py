"""Benchmarks: ``python -m ffcv_rs.benchmarks FILE`` measures a loader over a file (see
``__main__``); ``decorator`` and ``suites`` are FFCV's micro-benchmark framework
(``ffcv.benchmarks``), run by ``decorator.run_all()``."""
