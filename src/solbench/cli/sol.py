"""`solbench sol PATH...`: the speed-of-light bounds of every workload of one or more problems."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from .. import limits
from ..report.markup import TextTable as Table
from ..report.markup import styled

from .common import (escape_markup, LIMIT_HELP, MAX_BYTES_HELP, WORKLOADS_HELP, choose_workloads, clean_errors,
                     console, err_console, parse_bytes)


def _fmt_num(x: float) -> str:
    if not x:
        return "0"
    for unit, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def _problem_paths(args: list[Path]) -> list[Path]:
    """Every problem the arguments name: problem dirs, KernelBench files, bundled problem or
    suite names, and directories holding problems one or two levels down."""
    from ..suites import resolve_problem, resolve_suite_or_dir

    out: list[Path] = []
    for a in args:
        p = resolve_problem(a)
        out.extend(resolve_suite_or_dir(p if p.exists() else a))
    return out


#: the GPU ``solbench sol`` prices when none is named (the one this project measures on)
DEFAULT_HARDWARE = "H200"


def _table(res: dict) -> Table:
    t = Table(title=f"{res['problem']}: T_SOL on {res['hardware']} ({res['hardware_kind']}), "
                    f"model={res['model']}")
    other = "solar" if res["model"] == "refined" else "refined"
    for c in ("#", "axes", "FLOPs by class", "bytes fused", "tensor ms", "cuda ms", "sfu ms",
              "dram ms", "T_SOL ms", f"{other} ms", "certain ms", "bound by", "AI"):
        t.add_column(c, justify="left" if c in ("axes", "FLOPs by class", "bound by") else "right",
                     overflow="fold")
    for j, r in enumerate(res["workloads"]):
        i = r.get("index", j)
        if r.get("sol_ms") is None:
            t.add_row(str(i), json.dumps(r["axes"]), styled(r['error'][:80], "red"), *["-"] * 10)
            continue
        terms = r["terms_ms"]
        fl = ", ".join(f"{k} {_fmt_num(v)}" for k, v in r["flops"].items()) or "-"
        ai = r["arithmetic_intensity"]
        t.add_row(str(i), ",".join(f"{k}={v}" for k, v in r["axes"].items()), fl,
                  _fmt_num(r["bytes_fused"]) + "B",
                  *(f"{terms.get(k, 0):.4g}" for k in ("tensor", "cuda", "sfu", "dram")),
                  f"{r['sol_ms']:.4g}", f"{r['sol_ms_by_model'][other]:.4g}",
                  f"{r['t_certain_ms']:.3g}", r["bottleneck"], "-" if ai is None else f"{ai:.3g}")
    return t


#: ``--jobs 0`` (the default) starts a counting process per CPU only for this many problems or
#: more: each pays its own start (Python, torch: about 3 s of CPU), which a few problems, most
#: of them counted in well under a second on the meta device, never earn back
AUTO_POOL_MIN_PROBLEMS = 16


def auto_jobs(jobs: int, n_problems: int, cpu_count: int | None) -> int:
    """Counting processes for ``--jobs jobs`` over ``n_problems`` problems: ``jobs`` when given
    (>= 1), else (0) one per CPU, at most one per problem, and only from
    :data:`AUTO_POOL_MIN_PROBLEMS` problems on (below: 1).

    Raises:
        ValueError: ``jobs`` < 0.
    """
    if jobs < 0:
        raise ValueError(f"--jobs must be >= 0, got {jobs}")
    if jobs:
        return max(1, min(jobs, n_problems))
    if n_problems < AUTO_POOL_MIN_PROBLEMS:
        return 1
    return max(1, min(cpu_count or 1, n_problems))


#: a reference that reads tensor values counts on real CPU tensors, typically tens of times
#: slower per workload than a meta-device count (docs/sol-model.md, Speed)
VALUE_READ_WEIGHT = 30


def estimated_cost(path: Path) -> float:
    """A guess of the relative counting time of the problem at ``path``, to hand out the slow
    problems first: its number of workloads, times :data:`VALUE_READ_WEIGHT` when the
    reference source reads values (``.item()``, ``.tolist()``). 1.0 when the files cannot be
    read (a KernelBench file, a broken problem): the guess only orders the work."""
    try:
        n = sum(1 for line in (path / "workload.jsonl").read_text().splitlines() if line.strip())
        ref = json.loads((path / "definition.json").read_text()).get("reference", "")
    except (OSError, ValueError, AttributeError):
        return 1.0
    reads = isinstance(ref, str) and (".item()" in ref or ".tolist()" in ref)
    return float(max(n, 1) * (VALUE_READ_WEIGHT if reads else 1))


def schedule_order(paths: list[Path]) -> list[int]:
    """Indices of ``paths`` in the order to hand them to workers: the most costly first
    (:func:`estimated_cost`), ties in argument order, so the last to finish is a short one."""
    costs = [estimated_cost(Path(p)) for p in paths]
    return sorted(range(len(paths)), key=lambda i: (-costs[i], i))


def isolated_results(paths: list[Path], n_jobs: int, hardware: str, model: str, load,
                     cache=None):
    """``(path, "ok", problem_rows result)`` or ``(path, "error", SolbenchError)`` for each of
    ``paths``, in argument order, counted by ``n_jobs`` counting children
    (:class:`~solbench.sol.isolated.CountingChild`, each served by a thread of this process):
    the costliest problems go out first (:func:`schedule_order`), a child takes the next
    problem when it is done with one, and a result is held until every earlier argument's is
    out. ``load(path)`` gives ``(problem, workloads)`` or raises a SolbenchError; ``cache``:
    the counts cache (:class:`~solbench.sol.cache.CountsCache`), read here first, the children
    filling it; a child starts only for a workload it misses. A reference
    that crashes or hangs its child costs the workload it was counting (an error row); a
    fresh child goes on."""
    import queue
    import threading

    from ..errors import SolbenchError
    from ..sol.batch import problem_rows_isolated
    from ..sol.isolated import CountingChild

    todo: queue.SimpleQueue = queue.SimpleQueue()
    for i in schedule_order(paths):
        todo.put(i)
    results: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def serve(child: CountingChild) -> None:
        with child:
            while not stop.is_set():
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    p, wls = load(paths[i])
                    results.put((i, "ok", problem_rows_isolated(child, i, p, hardware, model, wls,
                                                                cache=cache)))
                except SolbenchError as e:
                    results.put((i, "error", e))
                except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
                    results.put((i, "raise", e))

    n = max(1, min(n_jobs, len(paths)))
    # one child per core: each counts on one thread, so that none oversubscribes the machine
    threads = 1 if n > 1 else None
    children = [CountingChild(hardware, cache=None if cache is None else str(cache.root), threads=threads,
                              cache_key=None if cache is None else cache.key) for _ in range(n)]
    workers = [threading.Thread(target=serve, args=(c,), daemon=True) for c in children]
    for t in workers:
        t.start()
    done: dict[int, tuple] = {}
    nxt = 0
    finished = False
    try:
        while nxt < len(paths):
            i, kind, res = results.get()
            if kind == "raise":
                raise res
            done[i] = (kind, res)
            while nxt in done:
                kind, res = done.pop(nxt)
                yield paths[nxt], kind, res
                nxt += 1
        finished = True
    finally:
        stop.set()
        if not finished:  # stopped early (Ctrl-C, an error, a consumer that left): kill now
            for c in children:
                c.abort()
        for t in workers:  # each ends its child (its session) before it returns
            t.join(timeout=limits.SOL_THREAD_JOIN_S)


def register(app: typer.Typer) -> None:
    @app.command("sol")
    def sol_cmd(
        problems: list[Path] = typer.Argument(..., help="problem directories, KernelBench .py files, "
                                              "suite names, or directories holding problems"),
        hardware: Optional[str] = typer.Option(None, "--hardware", "-H", help="spec id (solbench hardware "
                                               "list) or spec.toml; default H200, said on stderr"),
        model: str = typer.Option("refined", "--model", "-m", help="refined (ours, the lower bound) or solar "
                                  "(upstream SOLAR's conventions; on B200 its 1.5 GHz-lock constants, B200_SOLAR)"),
        workload: Optional[str] = typer.Option(None, "--workloads", "--workload", "-w", help=WORKLOADS_HELP),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help=LIMIT_HELP),
        max_bytes: Optional[str] = typer.Option(None, "--max-bytes", help=MAX_BYTES_HELP),
        as_json: bool = typer.Option(False, "--json", help="strict JSON on stdout: one object per problem "
                                     "per line, each with \"problem\" and \"workloads\""),
        cache: Optional[Path] = typer.Option(None, "--cache", help="read and store counted work in this "
                                             "directory (default: $SOLBENCH_SOL_CACHE, else "
                                             "$XDG_CACHE_HOME/solbench/sol-counts or ~/.cache/solbench/sol-counts; "
                                             "one JSON file per workload, keyed by the counting code, problem "
                                             "and workload, signed with your trace key)"),
        no_cache: bool = typer.Option(False, "--no-cache", help="count every workload afresh, "
                                      "reading and storing nothing"),
        jobs: int = typer.Option(0, "--jobs", "-j", help="counting processes, each counting one problem "
                                 "at a time (0: one per CPU from "
                                 f"{AUTO_POOL_MIN_PROBLEMS} problems on, else one)"),
    ) -> None:
        """Per-workload T_SOL: FLOPs by class, bytes, each resource's time, the bottleneck, both
        models' T_SOL and the certain floor. Counted in child processes, each serving many
        problems: a reference that crashes or hangs its count costs that workload an error row."""
        from ..errors import SolbenchError, SpecError
        from ..sol import load_hardware
        from ..sol.batch import problem_rows
        from ..spec import load_problem

        failed = unbounded = 0
        with clean_errors():
            if model not in ("refined", "solar"):
                raise SpecError(None, "--model", f"unknown model {model!r} (refined or solar)")
            said_default = hardware is None
            hardware = DEFAULT_HARDWARE if hardware is None else hardware
            hw = load_hardware(hardware)
            if model == "solar" and hw.solar_spec:
                err_console.print(f"[yellow]note:[/yellow] --model solar on {hw.id} prices with {hw.solar_spec} "
                                  "(upstream SOLAR's constants, the basis of the official SOL-ExecBench figures)",
                                  highlight=False)
            max_b = parse_bytes(max_bytes)
            paths = _problem_paths(problems)
            counts_cache = None
            if not no_cache:
                from ..run.sol_cache import counts_cache as default_counts_cache
                from ..sol.cache import CountsCache
                from ..store.auth import load_key

                counts_cache = (default_counts_cache() if cache is None
                                else CountsCache(cache, key=load_key(create=True)))
            n_jobs = auto_jobs(jobs, len(paths), os.cpu_count()) if jobs >= 0 else None
            if n_jobs is None:
                raise SpecError(None, "--jobs", f"must be >= 0, got {jobs}")

        def load(path):
            p = load_problem(path)
            return p, choose_workloads(p, workload, limit, max_b)

        def in_process():
            for path in paths:
                try:
                    p, wls = load(path)
                    yield path, "ok", problem_rows(p, hw, model, wls, cache=counts_cache)
                except SolbenchError as e:
                    yield path, "error", e

        from ..sol.isolated import counting_in_process

        results = in_process() if counting_in_process() else isolated_results(
            paths, n_jobs, hardware, model, load, counts_cache)
        for path, kind, res in results:
            if kind == "error":
                if len(paths) == 1:
                    with clean_errors():
                        raise res
                failed += 1
                res = str(res)
                err_console.print(f"[red]error:[/red] {escape_markup(res)}", highlight=False, soft_wrap=True)
                if as_json:
                    typer.echo(json.dumps({"problem": str(path), "error": res, "workloads": []}))
                continue
            if said_default:
                # bounds are per GPU: a user who named none must see which one was priced (once,
                # with the first bound, so that a usage error stays the one line it is)
                said_default = False
                err_console.print(f"[yellow]note:[/yellow] no --hardware given: T_SOL on {hardware} "
                                  "(the default; `solbench hardware list` shows the others)", highlight=False)
            unbounded += sum(1 for r in res["workloads"] if r.get("sol_ms") is None)
            if as_json:
                typer.echo(json.dumps(res, allow_nan=False))
                continue
            console.print(_table(res))
            unknown = sorted({k for r in res["workloads"] for k in r.get("unknown_ops", {})})
            if unknown:
                err_console.print(f"[yellow]unknown ops (not counted): {', '.join(unknown)}[/yellow]")
            if any(r.get("real_tensors") for r in res["workloads"]):
                err_console.print("[yellow]some workloads needed real tensors (data-dependent reference)[/yellow]")
        if unbounded:
            err_console.print(f"[red]error:[/red] {unbounded} workload(s) have no bound (their rows say why)",
                              highlight=False)
        if failed or unbounded:
            raise typer.Exit(1)
