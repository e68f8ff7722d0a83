"""run.sinks: the one TraceSink path from an executor to the store and progress."""

from solbench.run.sinks import CallbackSink, Delivery, StoreSink, run_sinks
from solbench.spec.trace import Environment, Evaluation, ExecutorStamp, Status, Trace
from solbench.spec.workload import Workload
from solbench.store import read_traces


def _t(uuid: str, stamped: bool = True) -> Trace:
    ex = ExecutorStamp(name="local", worker="local", pid=1, attempt=1, retried=False) if stamped else None
    return Trace(definition="d", solution="s", workload=Workload(uuid=uuid, axes={}, inputs={}),
                 evaluation=Evaluation(status=Status.RUNTIME_ERROR, environment=Environment(hardware="cpu"),
                                       executor=ex))


class _Seen:
    """A sink that records what it got and whether the store already held it."""

    def __init__(self, path):
        self.path, self.got, self.done = path, [], []

    def traces(self, pair, traces):
        on_disk = [t.workload.uuid for t in read_traces(self.path, quiet=True)]
        self.got += [(pair, t.workload.uuid, t.evaluation.executor and t.evaluation.executor.seq,
                      t.workload.uuid in on_disk) for t in traces]

    def pair_done(self, pair, traces):
        self.done.append((pair, len(traces)))


def test_delivery_numbers_every_written_trace_and_stores_before_the_other_sinks(tmp_path):
    out = tmp_path / "r.jsonl"
    seen = _Seen(out)
    d = run_sinks(out, sinks=[seen])
    d.traces("a", [_t("w0"), _t("w1")])
    d.traces("b", [_t("w2", stamped=False)])  # a trace without a stamp still takes a position
    d.traces("b", [_t("w3")])
    d.pair_done("b", d.written[2:])
    # seq: 1-based position among the run's traces; each trace was on disk before the sink saw it
    assert seen.got == [("a", "w0", 1, True), ("a", "w1", 2, True), ("b", "w2", None, True),
                        ("b", "w3", 4, True)]
    assert seen.done == [("b", 2)]
    stored = read_traces(out, quiet=True)
    assert [(t.workload.uuid, t.evaluation.executor and t.evaluation.executor.seq) for t in stored] == \
        [("w0", 1), ("w1", 2), ("w2", None), ("w3", 4)]


def test_callbacks_are_a_sink(tmp_path):
    calls = []
    d = Delivery([StoreSink(tmp_path / "r.jsonl")])
    d.sinks.append(CallbackSink(
        on_trace=lambda p, t: calls.append(("trace", p, t.evaluation.executor.seq)),
        on_pair_done=lambda p, ts: calls.append(("done", p, len(ts)))))
    d.pair_done("a", d.traces("a", [_t("w0")]))
    assert calls == [("trace", "a", 1), ("done", "a", 1)]
