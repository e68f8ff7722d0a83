"""`solbench generate`, `solbench verify`, `solbench export`: the model study (docs/study.md).
Thin: solbench.study does the work."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from .common import check_device, clean_errors, console, err_console, fail


def register(app: typer.Typer) -> None:
    @app.command("generate")
    def generate_cmd(
        targets: list[str] = typer.Argument(..., help="suites (l1), problems (l1/relu_fp32, a problem "
                                                      "directory, a KernelBench .py) or folders of them"),
        models: list[str] = typer.Option(..., "--model", "-m", help="model name sent to the endpoint (with "
                                                                     "--agent-cmd: the agent's name in labels); "
                                                                     "repeatable: the models one after another"),
        out: Path = typer.Option(..., "-o", "--out", help="solutions folder (solbench run --solutions)"),
        base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint, e.g. "
                                               "http://localhost:8000/v1 (vLLM); default $OPENAI_BASE_URL, "
                                               "else api.openai.com; key from $OPENAI_API_KEY"),
        agent_cmd: Optional[str] = typer.Option(None, "--agent-cmd", help="run CMD PROBLEM_PATH SOLUTION_PATH "
                                                "instead of a chat endpoint"),
        samples: int = typer.Option(1, "--samples", help="candidates per problem"),
        turns: int = typer.Option(1, "--turns", help="refinement turns: each gets the last one's verdict and log"),
        temperature: Optional[float] = typer.Option(None, "--temperature", help="sampling temperature "
                                                    "(default: the endpoint's)"),
        language: str = typer.Option("pytorch", "--language", help="target language: pytorch | triton | cuda"),
        concurrency: int = typer.Option(4, "--concurrency", help="requests in flight at most"),
        timeout: float = typer.Option(600.0, "--timeout", help="seconds one request (or agent run) may take"),
        retries: int = typer.Option(4, "--retries", help="retries of a request after 429, 5xx, a "
                                                           "connection error or a timeout"),
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="max_tokens of each request"),
        resume: bool = typer.Option(False, "--resume", help="continue OUT: stored replies are never asked again"),
        device: Optional[str] = typer.Option(None, "--device", help="where turns are evaluated (cpu, cuda)"),
        json_out: bool = typer.Option(False, "--json", help="print the counts as JSON"),
    ) -> None:
        """Ask a model (or an agent) for a candidate of every problem; write OUT/<problem>/<label>.py|.json."""
        from ..study.client import AgentRunner, ChatClient
        from ..study.generate import GenerateOptions, generate, resolve_targets

        for name, v in (("--samples", samples), ("--turns", turns), ("--concurrency", concurrency)):
            if v < 1:
                fail(f"{name}: must be >= 1, got {v}")
        if retries < 0 or not timeout > 0:
            fail("--retries must be >= 0 and --timeout > 0")
        if agent_cmd is not None and base_url is not None:
            fail("--agent-cmd and --base-url exclude each other")
        dev = check_device(device) if turns > 1 else (device or "cpu")
        with clean_errors():
            paths = resolve_targets(targets)
            if agent_cmd is not None:
                client, agent = None, AgentRunner(agent_cmd, timeout_s=timeout)
            else:
                if not os.environ.get("OPENAI_API_KEY") and not (base_url or os.environ.get("OPENAI_BASE_URL")):
                    fail("OPENAI_API_KEY is not set (a local server such as vLLM: pass --base-url "
                         "and any key, e.g. OPENAI_API_KEY=EMPTY)")
                client = ChatClient(base_url or os.environ.get("OPENAI_BASE_URL"),
                                    os.environ.get("OPENAI_API_KEY"), timeout_s=timeout,
                                    retries=retries, max_tokens=max_tokens)
                agent = None

            def show(problem, label, info):
                if not json_out:
                    err_console.print(f"{problem} / {label}: {info['status']}"
                                      + (" (stored)" if info["resumed"] else "")
                                      + (f": {info['message']}" if info["status"] != "GENERATED" else ""),
                                      highlight=False, markup=False)

            for model in dict.fromkeys(models):  # each once, in the order given
                opts = GenerateOptions(model=model, out=out, samples=samples, turns=turns,
                                       temperature=temperature, language=language,
                                       concurrency=concurrency, resume=resume, device=dev,
                                       endpoint=agent_cmd or base_url or os.environ.get("OPENAI_BASE_URL"))
                try:
                    res = generate(paths, opts, client=client, agent=agent, on_event=show)
                except KeyboardInterrupt:
                    # requests in flight are abandoned (their threads would hold the exit until
                    # they time out); every stored reply is already on disk
                    err_console.print(f"interrupted: stored replies are kept; --resume continues {out}",
                                      highlight=False, markup=False)
                    os._exit(130)
                if json_out:
                    print(json.dumps(res.to_json() if len(models) == 1 else {"model": model, **res.to_json()}))
                    continue
                console.print(f"{model}: {len(res.written)} candidates in {out} ({len(paths)} problems x "
                              f"{samples} samples x {turns} turns); {res.requests} "
                              f"{'agent runs' if agent else 'requests sent'} now, "
                              f"{res.resumed} stored before; "
                              f"tokens: {res.prompt_tokens} prompt, {res.completion_tokens} completion; "
                              + ", ".join(f"{k}:{v}" for k, v in sorted(res.statuses.items())),
                              highlight=False, markup=False)

    @app.command("verify")
    def verify_cmd(
        results: list[Path] = typer.Argument(..., help="results files (solbench run -o)"),
        solutions: Path = typer.Option(..., "--solutions", help="the solutions folder the results came from"),
        problems: list[str] = typer.Option([], "--problems", help="where the problems are (suite, folder, "
                                           "file; repeatable), besides the bundled suites"),
        out: Optional[Path] = typer.Option(None, "-o", "--out", help="verification records (default "
                                           "<first results>.verify.jsonl, which report reads)"),
        iters: Optional[int] = typer.Option(None, "--iters", help="timed calls (default max(20, 2x the claim's))"),
        device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda or cuda:N"),
        json_out: bool = typer.Option(False, "--json", help="print the verdict counts as JSON"),
    ) -> None:
        """Re-evaluate every claimed speedup in a fresh process with a new seed and more timed calls."""
        from ..report.models import verify_path
        from ..study.verify import verdict_line
        from ..report.records import load
        from ..study.verify import verify

        if iters is not None and iters < 1:
            fail(f"--iters: must be >= 1, got {iters}")
        if not solutions.is_dir():
            fail(f"--solutions: {solutions}: no such directory")
        dev = check_device(device)
        target = out or verify_path(results[0])
        with clean_errors():
            rs = load(results)

            def show(rec):
                if not json_out:
                    err_console.print(verdict_line(rec), highlight=False, markup=False)

            recs = verify(rs.traces, solutions, target, problems=problems, device=dev, iters=iters,
                          on_record=show)
        counts: dict[str, int] = {}
        for r in recs:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        if json_out:
            print(json.dumps({"file": str(target), "claims": len(recs), "verdicts": counts}))
        else:
            console.print(f"{len(recs)} claimed speedups re-evaluated: "
                          + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")
                          + f"; records in {target}", highlight=False, markup=False)

    @app.command("export")
    def export_cmd(
        results: list[Path] = typer.Argument(..., help="results files"),
        out: Path = typer.Option(..., "-o", "--out", help="bundle folder (new)"),
        problems: list[str] = typer.Option([], "--problems", help="where the problems are, for their "
                                           "hashes (besides the bundled suites)"),
        adopt_legacy: bool = typer.Option(False, "--adopt-legacy", help="sign the traces of "
                                          "unauthenticated (legacy) results files with your key"),
    ) -> None:
        """Write every evaluation as one dataset: Parquet, the traces JSONL and a manifest."""
        from ..study.export import export

        with clean_errors():
            m = export(results, out, problems=problems, adopt_legacy=adopt_legacy)
        console.print(f"{out}: {m['traces']} traces, {m['verifications']} verification records, "
                      f"{len(m['problems'])} problems; files: {', '.join(m['files'])}",
                      highlight=False, markup=False)
