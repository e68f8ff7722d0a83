"""The run layer: from a plan of (problem, solution, workload) pairs to stored traces.

Above the harness and ``sol``, below the CLI (docs/architecture.md, "The path of a trace"):

- :mod:`.context`: :class:`~.context.TraceContext`, what is known about a trace before the
  harness runs (solution hash, label, executor stamp, static-audit findings, the SOL step),
  handed to the evaluator, which makes each trace once, finished.
- :mod:`.sol`: the SOL bounds of a run's workloads (counted in a child process, alongside
  the evaluation) and the SOL block and finding of one measured time.
- :mod:`.session`: one problem at a time: :func:`~.session.evaluate_and_score`.
"""
