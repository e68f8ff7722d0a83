"""solbench: correctness, timing and speed-of-light (SOL) analysis of GPU kernels.

Data flows one way through the packages:

``spec`` (definitions, workloads, solutions, traces) -> ``inputs`` (input generation)
-> ``harness`` (isolated worker, correctness and timing evidence, guards)
-> ``sol`` (analytic bound and SOL score) -> ``store`` (trace files) -> ``report``.
``integrity`` (static audit, trivial-candidate screen), ``suites`` (bundled problems) and
``profile`` (addressable fraction) build on those; ``cli`` is a thin layer on top. Below
``spec`` sit ``languages`` (the kernel-language plug-ins), ``paths`` (every folder and
``SOLBENCH_*`` variable) and ``errors``. docs/architecture.md lists the layers;
pyproject.toml's import-linter contracts enforce them.
"""

__version__ = "0.1.0"
