"""The evaluation settings (solbench.config.EvalConfig) and the options that set them: every
field bounded and frozen; every evaluating command refuses a value out of bounds with one
line naming the option (exit 2) before any work; the options are defined once, so their
help is the same text in every command; the service's request takes the same bounds; the
fixed time limits are named (solbench.limits), not literals at the call sites."""

from __future__ import annotations

import dataclasses
import math
import pickle
import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from solbench.cli import app, command
from solbench.config import EvalConfig, explain

SRC = Path(__file__).resolve().parents[2] / "src" / "solbench"


# --- the model ----------------------------------------------------------------------------
def test_constructor_compatible_and_frozen():
    cfg = EvalConfig(device="cpu", iters=8, rounds=2)
    assert (cfg.device, cfg.iters, cfg.rounds, cfg.n_iters(), cfg.n_warmup()) == ("cpu", 8, 2, 8, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.iters = 3  # type: ignore[misc]
    again = dataclasses.replace(cfg, iters=3, device="cuda:1")
    assert (again.iters, again.device, again.is_cuda, cfg.iters) == (3, "cuda:1", True, 8)
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # the Ray executor ships it to its workers
    t = cfg.with_timeout(3)
    assert (t.first_call_timeout_s, t.call_timeout_s, t.later_call_timeout(9.0)) == (3.0, 3.0, 3.0)


def test_spare_workers_default_depends_on_the_device():
    assert EvalConfig(device="cpu").n_spare_workers() == 0
    assert EvalConfig(device="cuda").n_spare_workers() == 2
    assert EvalConfig(device="cpu", spare_workers=3).n_spare_workers() == 3


@pytest.mark.parametrize("field,value,says", [
    ("iters", 0, "iters: must be >= 1, got 0"),
    ("iters", 100_001, "iters: must be <= 100000, got 100001"),
    ("rounds", 0, "rounds: must be >= 1, got 0"),
    ("rounds", 1001, "rounds: must be <= 1000, got 1001"),
    ("warmup", -1, "warmup: must be >= 0, got -1"),
    ("min_iters", 0, "min_iters: must be >= 1, got 0"),
    ("blocks", 0, "blocks: must be >= 1, got 0"),
    ("noise_target", 0.0, "noise_target: must be > 0, got 0.0"),
    ("noise_target", 1.0, "noise_target: must be < 1, got 1.0"),
    ("pool_bytes", 0, "pool_bytes: must be >= 1, got 0"),
    ("max_pool", 0, "max_pool: must be >= 1, got 0"),
    ("verify", -1, "verify: must be >= 0, got -1"),
    ("verify_fraction", 1.5, "verify_fraction: must be <= 1, got 1.5"),
    ("build_timeout_s", 0.0, "build_timeout_s: must be > 0, got 0.0"),
    ("build_timeout_s", math.inf, "build_timeout_s: must be a finite number, got inf"),
    ("first_call_timeout_s", -1.0, "first_call_timeout_s: must be > 0, got -1.0"),
    ("call_timeout_s", math.nan, "call_timeout_s: must be a finite number, got nan"),
    ("call_timeout_s", 86_401.0, "call_timeout_s: must be <= 86400, got 86401.0"),
    ("call_timeout_floor_s", 0.0, "call_timeout_floor_s: must be > 0, got 0.0"),
    ("call_timeout_factor", -50.0, "call_timeout_factor: must be > 0, got -50.0"),
    ("seed", -1, "seed: must be >= 0, got -1"),
    ("seed", 1 << 256, f"seed: must be < {1 << 256}, got {1 << 256}"),
    ("log_cap", -1, "log_cap: must be >= 0, got -1"),
    ("spare_workers", -1, "spare_workers: must be >= 0, got -1"),
    ("max_workloads", 0, "max_workloads: must be >= 1, got 0"),
    ("device", "tpu", "device: must be cpu, cuda or cuda:N, got 'tpu'"),
    ("device", "cuda:x", "device: must be cpu, cuda or cuda:N, got 'cuda:x'"),
    ("cupti_markers", "cuda", "cupti_markers: must be 'ranges' or 'streams', got 'cuda'"),
])
def test_every_bound_names_its_field(field, value, says):
    with pytest.raises(ValidationError) as e:
        EvalConfig(**{field: value})
    assert explain(e.value) == says
    # a copy is validated as the original is: no way around the bounds
    with pytest.raises(ValidationError):
        dataclasses.replace(EvalConfig(), **{field: value})


def test_unknown_setting_is_refused():
    with pytest.raises(ValidationError) as e:
        EvalConfig(itres=5)
    assert explain(e.value) == "itres: not a setting of EvalConfig"


def test_the_server_takes_the_same_bounds():
    """EvalRequest's fields are EvalConfig's types: one value, one answer on both sides."""
    from solbench.serve.api import EvalRequest

    for field, values in {"rounds": (0, 1, 1000, 1001), "iters": (0, 1, 100_000, 100_001),
                          "seed": (-1, 0, (1 << 256) - 1, 1 << 256),
                          "call_timeout_s": (0.0, 1e-3, 86_400.0, 86_401.0, math.inf, math.nan),
                          "first_call_timeout_s": (-1.0, 5.0, math.inf),
                          "build_timeout_s": (0.0, 600.0, math.nan),
                          "device": ("cpu", "cuda:3", "tpu", "cuda:")}.items():
        for v in values:
            def ok(make) -> bool:
                try:
                    make()
                    return True
                except ValidationError:
                    return False
            local = ok(lambda: EvalConfig(**{field: v}))
            served = ok(lambda: EvalRequest(problem="p", **{field: v}))
            assert local == served, (field, v, local, served)
    # and --device's own check (before torch loads) takes the same devices
    from solbench.cli.common import _DEVICE_RX

    for v in ("cpu", "cuda", "cuda:0", "cuda:99", "cuda:100", "tpu", "cuda:", "CPU", "cpu "):
        ok_cfg = True
        try:
            EvalConfig(device=v)
        except ValidationError:
            ok_cfg = False
        assert bool(_DEVICE_RX.match(v)) == ok_cfg, v


# --- the options --------------------------------------------------------------------------
BAD = [
    (["--iters", "0"], "error: --iters: must be >= 1, got 0"),
    (["--iters", "-5"], "error: --iters: must be >= 1, got -5"),
    (["--rounds", "0"], "error: --rounds: must be >= 1, got 0"),
    (["--rounds", "1001"], "error: --rounds: must be <= 1000, got 1001"),
    (["--timeout", "-1"], "error: --timeout: must be > 0, got -1.0"),
    (["--timeout", "0"], "error: --timeout: must be > 0, got 0.0"),
    (["--timeout", "inf"], "error: --timeout: must be a finite number, got inf"),
    (["--timeout", "nan"], "error: --timeout: must be a finite number, got nan"),
    (["--timeout", "1e6"], "error: --timeout: must be <= 86400, got 1000000.0"),
    (["--build-timeout", "0"], "error: --build-timeout: must be > 0, got 0.0"),
    (["--build-timeout", "inf"], "error: --build-timeout: must be a finite number, got inf"),
    (["--seed", "-1"], "error: --seed: must be >= 0, got -1"),
]


def _one_error_line(r) -> str:
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(err) == 1, r.output
    assert "Traceback" not in r.output
    return err[0]


@pytest.mark.parametrize("args,line", BAD)
def test_eval_refuses_a_bad_setting_in_one_line(tmp_path, args, line):
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(app, ["eval", "l1/relu_fp32", "--device", "cpu", "-o", str(out), *args])
    assert r.exit_code == 2 and _one_error_line(r) == line
    assert not out.exists() and r.stdout == ""


@pytest.mark.parametrize("args,line", BAD + [
    (["--spare-workers", "-1"], "error: --spare-workers: must be >= 0, got -1"),
    (["--spare-workers", "65"], "error: --spare-workers: must be <= 64, got 65"),
])
def test_run_refuses_a_bad_setting_in_one_line(tmp_path, args, line):
    """``solbench run`` took ``--iters 0``, ``--rounds 0`` and ``--timeout inf`` (its own
    copy of the checks had none for them) and failed later, or waited forever."""
    out = tmp_path / "r.jsonl"
    (tmp_path / "sols").mkdir()
    r = CliRunner().invoke(app, ["run", "l1", "--solutions", str(tmp_path / "sols"), "-o", str(out),
                                 "--device", "cpu", *args])
    assert r.exit_code == 2 and _one_error_line(r) == line
    assert not out.exists()


@pytest.mark.parametrize("cmd", [["run-dataset", "{tmp}"], ["run-kernelbench", "{tmp}", "{tmp}"],
                                 ["demo"], ["selftest"]])
def test_the_other_evaluating_commands_refuse_it_too(tmp_path, cmd):
    args = [a.format(tmp=tmp_path) for a in cmd]
    r = CliRunner().invoke(app, [*args, "--iters", "0"])
    assert r.exit_code == 2
    line = _one_error_line(r)
    # selftest asks for more: two blocks per side with quartiles (its own, stricter rule)
    assert line in ("error: --iters: must be >= 1, got 0",
                    "error: --iters: must be >= 4 (two blocks per side, quartiles of each), got 0")


SHARED = ["--device", "--workloads", "--limit", "--max-bytes", "--rounds", "--iters", "--seed",
          "--timeout", "--build-timeout", "--keep-going", "--spare-workers", "--no-timing"]


def test_shared_options_read_the_same_in_every_command():
    """One definition per option: where two commands have it, its help and default agree
    (``--limit`` and ``--workloads`` say "per problem" in the runs, as before), and the
    defaults the help states are EvalConfig's."""
    root = command()
    seen: dict[str, dict[str, tuple]] = {}
    for name in ("eval", "run", "run-dataset", "run-kernelbench", "demo"):
        for p in root.commands[name].params:
            # run-dataset's and run-kernelbench's --limit counts problems, as upstream's
            # run_dataset.py does (README): another option under the same name, by design
            if p.opts[0] in SHARED and not (p.opts[0] == "--limit" and name.startswith("run-")):
                seen.setdefault(p.opts[0], {})[name] = (re.sub(r" ?\(?per problem\)?$", "", p.help),
                                                        p.default)
    for opt, by_cmd in seen.items():
        assert len(set(by_cmd.values())) == 1, (opt, by_cmd)
    assert set(seen["--iters"]) == {"eval", "run", "run-dataset", "run-kernelbench", "demo"}
    assert set(seen["--timeout"]) == {"eval", "run"} and set(seen["--seed"]) == {"eval", "run"}
    d = EvalConfig()
    assert seen["--rounds"]["eval"][1] == d.rounds
    help_timeout = seen["--timeout"]["eval"][0]
    assert f"{d.first_call_timeout_s:g} s for the first call" in help_timeout
    assert f"{d.call_timeout_factor:g}x the reference's time, at least {d.call_timeout_floor_s:g} s" \
        in help_timeout
    assert f"on the CPU {EvalConfig(device='cpu').n_iters()})" in seen["--iters"]["eval"][0]


def test_eval_settings_reach_the_config(monkeypatch, tmp_path):
    """What the options set is what the evaluation gets (the server's request is made from
    the same config: serve.client.request_from_config)."""
    from solbench.run import session

    got = {}

    def fake(problem, solution, cfg, **kw):
        got["cfg"] = cfg
        return []

    monkeypatch.setattr(session, "evaluate_and_score", fake)
    r = CliRunner().invoke(app, ["eval", "l1/relu_fp32", "--device", "cpu", "-w", "0", "--iters", "7",
                                 "--rounds", "3", "--timeout", "4", "--build-timeout", "9", "--seed",
                                 "0x10", "--keep-going", "--no-timing", "-q"])
    assert r.exit_code == 1, r.output  # no trace: not every workload PASSED
    c = got["cfg"]
    assert (c.device, c.iters, c.rounds, c.call_timeout_s, c.first_call_timeout_s, c.build_timeout_s,
            c.seed, c.keep_going, c.timing, len(c.workloads)) == ("cpu", 7, 3, 4.0, 4.0, 9.0, 16, True,
                                                                  False, 1)


# --- the fixed time limits ----------------------------------------------------------------
#: modules other work is rewriting: their literals move to solbench.limits with it
#: (TIME_BEGIN_S, TIME_END_S, GUARDS_S, LOAD_S are declared for them)
PENDING = {"harness/worker.py", "harness/protocol.py"}
#: a limit given as a number: ``timeout=30``, ``timeout_s: float = 5.0``, ``wait=25.0``,
#: ``timeout_keep_alive=30``, ``wait_s: float = 0.2`` (zero, "do not wait", is no limit)
_LITERAL = re.compile(r"\b(timeout\w*|\w*_timeout_s|wait(_s)?)\s*(:\s*float\s*)?=\s*"
                      r"(?!0(\.0*)?(?![0-9.]))[0-9][0-9_.]*\s*[,)]")


def test_no_literal_time_limit_at_a_call_site():
    """A limit passed as a number (``timeout=30``) says neither why nor where else it is
    used; each is a named constant of solbench.limits (or a setting of EvalConfig)."""
    found = []
    for sub in ("harness", "run", "sol", "serve", "cli"):
        for f in sorted((SRC / sub).rglob("*.py")):
            rel = f.relative_to(SRC).as_posix()
            if rel in PENDING:
                continue
            for i, line in enumerate(f.read_text().splitlines(), 1):
                if _LITERAL.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{rel}:{i}: {line.strip()}")
    assert found == []


def test_limits_are_positive_and_listed():
    from solbench import limits

    table = limits.limits()
    assert {"REQUEST_S", "WORKER_START_S", "LOAD_S", "GUARDS_S", "DEAD_REAP_S"} <= set(table)
    assert all(0 < v < 3600 for v in table.values())
