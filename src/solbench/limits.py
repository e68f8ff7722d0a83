"""The fixed time limits (seconds) of solbench's own steps, each with why it has its value.

These bound work that runs no candidate code of its own choosing: the harness's requests to a
worker that only it defines (load the slot pool, read the guards, start the profiler), the
reaping of processes, probes of the machine, joins of solbench's own threads. A limit on what
a candidate does (its build, its first call, every later call) is a setting a user gives, with
bounds: :class:`solbench.config.EvalConfig` (``--build-timeout``, ``--timeout``).

A limit here is not a measurement: an honest step ends far inside it (the figures below are
what it takes), and one reached says the machine or a process is wedged, which the caller
reports (a worker request: WorkerTimeout, RUNTIME_ERROR with the op named; a join: the run
goes on without waiting further). Under ``--timeout`` the harness caps its own ops at
the larger of that limit and ``harness.process.HARNESS_OP_FLOOR_S``.

Imports nothing: every layer may read it (docs/architecture.md).
"""

from __future__ import annotations

# --- requests the parent sends to a worker (harness/process.py, protocol.request) ----------
#: default limit of a worker request that names none (``WorkerHandle.request``)
REQUEST_S = 120.0
#: a worker's start: interpreter, sandbox, ``import torch``, the CUDA context and the
#: worker's hello. 10-20 s on a loaded 16-core host with CUDA; 180 s leaves room for a first
#: start that fills a cold filesystem cache and for several workers starting at once.
WORKER_START_S = 180.0
#: ``load``: the worker fills its slot pool (every slot's inputs and outputs, up to the 16 GiB
#: pool budget on CUDA) and the L2 flush buffer: seconds at most for 16 GiB of device copies.
LOAD_S = 120.0
#: ``warm_profiler``: the first torch.profiler session of a worker loads CUPTI and Kineto
#: (10-40 s on a loaded host, the slowest start a worker has).
WARM_PROFILER_S = 120.0
#: ``guards`` and ``guard_table``: the worker's integrity checks (module snapshot, function
#: identities, backend flags) and the table of its guarded addresses: under a second on an
#: idle host; 60 s for a host under load.
GUARDS_S = 60.0
#: ``noop`` and ``time_begin`` (harness/timed.py): a call of nothing, a profiler session's
#: start: milliseconds to seconds; 60 s as for the guards.
TIME_BEGIN_S = 60.0
#: ``time_end`` (harness/timed.py): the profiler's trace is collected and parsed in the
#: worker (every kernel of every timed call): seconds for long runs; 120 s as for ``load``.
TIME_END_S = 120.0
#: ``exit``: an honest worker answers and exits at once; one that does not is killed.
WORKER_EXIT_S = 10.0

# --- ending and reaping processes ----------------------------------------------------------
#: a worker found dead (its channel closed): its exit status is collected this long; the
#: kernel has it within milliseconds of the close.
DEAD_REAP_S = 5.0
#: a worker killed with SIGKILL: reaped this long (an uninterruptible wait in a driver call
#: can hold a killed process for seconds).
KILLED_REAP_S = 10.0
#: the thread copying a dead worker's log out of its pipe ends at the pipe's end (EOF):
#: milliseconds; 2 s before the log is read without its last lines.
LOG_DRAIN_S = 2.0
#: the SOL counting child (sol/isolated.py) once it closed its stream: it is exiting; then
#: killed and reaped, this long per try (a tracer that never waits holds the wait).
SOL_CHILD_EXIT_S = 5.0
#: a thread that counts SOL bounds, joined after its child was ended (run/sol.py, cli/sol.py):
#: the thread returns as soon as its child is reaped (at most 2 x :data:`SOL_CHILD_EXIT_S`).
SOL_THREAD_JOIN_S = 30.0
#: a serve lane's thread at shutdown: it finishes the evaluation step it is in (a worker
#: request of at most :data:`REQUEST_S`, usually far less) and the harness's shutdown ends the
#: rest; the service does not wait longer.
LANE_JOIN_S = 60.0
#: the CLI's last sweep takes the spawn lock so no worker is half-started while it kills;
#: a spawn holds it for milliseconds. Without the lock after 5 s the sweep runs anyway.
SPAWN_LOCK_S = 5.0
#: a worker's cgroups (harness/taskcap.py, memcap.py) at release: what is left in them is
#: killed and the cgroup removed once its tasks are reaped (EBUSY until then): milliseconds
#: after a SIGKILL; a task stuck in the kernel is left behind after 5 s, never waited on.
CGROUP_RELEASE_S = 5.0
#: a launcher's cgroup removed once the process that joined it exited (harness/taskcap.py)
CGROUP_RMDIR_S = 2.0
#: spare workers still starting when their pool closes (harness/workers.SparePool.close):
#: each start ends within :data:`WORKER_START_S`; a closing run waits at most a minute.
SPARE_POOL_CLOSE_S = 60.0

# --- holding the candidate's processes (harness/freeze.py) ---------------------------------
#: a pause outside the timed window (before a reference block, at the end of a block): each
#: stopped task must be seen stopped within this; SIGSTOP lands within about a millisecond,
#: so a task still running after 0.2 s runs on (``child_process``).
PAUSE_LAND_S = 0.2
#: inside the held timed path (``freeze.Hold``): as :data:`PAUSE_LAND_S`, with room for a
#: loaded 2-vCPU host (15 ms the longest seen); the wait returns as soon as every task stopped.
HOLD_LAND_S = 2.0

# --- the service (serve/) -------------------------------------------------------------------
#: one HTTP exchange of the client: a request is answered at once, a long poll after at
#: most :data:`SERVE_POLL_S` (the server caps a poll at ``serve.app.MAX_WAIT_S``, 30 s).
SERVE_HTTP_S = 60.0
#: how long the client asks the server to hold a poll for new traces: below the server's
#: 30 s cap and the HTTP limit, so a poll ends by the server's answer, never by a timeout.
SERVE_POLL_S = 25.0
#: an idle keep-alive connection is closed after this; a connection that sends no request
#: head meets ``serve.app.HEAD_TIMEOUT_S`` (10 s) first.
SERVE_KEEP_ALIVE_S = 30.0
#: at shutdown, connections still open get this long to finish (a poll is answered at once
#: by the closing service).
SERVE_GRACEFUL_S = 2.0

# --- probes of the machine ----------------------------------------------------------------
#: a shell joining a cgroup (harness/taskcap.py): a fork and a write, milliseconds.
CGROUP_JOIN_PROBE_S = 10.0
#: a fresh interpreter printing its sys.path (harness/sandbox.py): about 50 ms idle, seconds
#: on a loaded host with a cold filesystem cache.
INTERPRETER_PROBE_S = 60.0
#: ``bwrap ... true``, the sandbox's own test run (harness/sandbox.py): namespaces and mounts,
#: tens of milliseconds.
SANDBOX_PROBE_S = 30.0

# --- polling --------------------------------------------------------------------------------
#: how often the Ray executor looks for lost workers while none of its pairs finished: a lost
#: worker's pair is redispatched within this (pairs take seconds to minutes).
RAY_POLL_S = 5.0
#: Ray workers' start (``--executor ray``): each imports torch and starts a CUDA context,
#: on a cluster that may first have to place them: minutes at worst.
RAY_START_S = 600.0


def limits() -> dict[str, float]:
    """Every limit above by name (docs and tests list them from here)."""
    return {k: v for k, v in globals().items() if k.isupper() and isinstance(v, float)}
