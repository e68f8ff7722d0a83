"""The built-in demo: real bundled problems, real candidates (honest and hostile), CUDA when
present, else CPU. See :func:`solbench.demo.run.demo_jobs`."""
