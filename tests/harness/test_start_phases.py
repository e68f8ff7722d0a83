from solbench.harness.process import start_phases
def test_start_phases_by_hand():
    st = {"module": 10.5, "imports": 10.75, "sandbox": 10.8, "torch": 12.0, "ready": 12.25}
    assert start_phases(10.0, st, 12.5) == {"module": 0.5, "imports": 0.25, "sandbox": 0.05,
                                            "torch": 1.2, "ready": 0.25, "hello": 0.25}
    assert start_phases(10.0, {"module": 9.0}, 12.5) == {}        # before the spawn
    assert start_phases(10.0, {"module": 11.0, "imports": 10.9}, 12.5) == {}  # out of order
    assert start_phases(10.0, {"module": "x"}, 12.5) == {}
    assert start_phases(10.0, None, 12.5) == {}
