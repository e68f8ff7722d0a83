"""Subprocess entry: compile a C++/CUDA extension with torch.utils.cpp_extension.load.

Usage: ``python -m solbench.harness.build_cpp '<json job>'``; prints the built module path
on its last stdout line; exit 1 with the compiler log on failure. The job (see
:func:`solbench.harness.build._cpp_job`) carries sources, build directory, flags and the
include directories the language plug-ins add (the solution's own directory first).
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    job = json.loads(sys.argv[1])
    from torch.utils import cpp_extension

    mod = cpp_extension.load(
        name=job["name"],
        sources=job["sources"],
        extra_cflags=job.get("cflags") or ["-O3"],
        extra_cuda_cflags=job.get("cuda_cflags") or ["-O3"],
        extra_ldflags=job.get("ld_flags") or [],
        extra_include_paths=job["include"] if isinstance(job["include"], list) else [job["include"]],
        build_directory=job["build_directory"],
        verbose=False,
    )
    print(mod.__file__)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # noqa: BLE001 - the log is the product here
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
