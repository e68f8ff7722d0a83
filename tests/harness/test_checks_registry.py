"""The check registry: one name, severity and doc per check; the harness emits no other names;
the docs table is the registry's."""

import re
from pathlib import Path

import pytest

from solbench.harness import checks
from solbench.harness.checks import finding, lookup

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_is_generated_from_the_registry():
    doc = (ROOT / "docs" / "integrity.md").read_text()
    assert checks.render_into(doc) == doc, \
        "docs/integrity.md checks table is stale: run python -m solbench.harness.checks docs/integrity.md"


def test_every_finding_in_the_sources_uses_a_registered_name():
    """No Finding(...) is built outside the registry, and every name passed to finding() or
    compared with ``.check ==`` is registered: in the harness and in the run layer (the SOL
    step, the trace context, the executors), which add findings to the same traces."""
    src = ROOT / "src" / "solbench"
    names = set()
    for path in sorted((src / "harness").glob("*.py")) + sorted((src / "run").rglob("*.py")):
        text = path.read_text()
        if path.name != "checks.py":
            assert "Finding(check=" not in text, f"{path}: build findings with checks.finding()"
        names |= set(re.findall(r'finding\(\s*"([a-z_.]+)"', text))
        names |= set(re.findall(r'\bf\.check == "([a-z_.]+)"', text))
        names |= set(re.findall(r'has\([^,]+, "([a-z_.]+)"\)', text))
    assert len(names) >= 25
    for n in names:
        lookup(n)  # raises for an unregistered name


def test_registry_refuses_unknown_names_and_unregistered_downgrades():
    with pytest.raises(KeyError):
        finding("made_up_check", "m")
    with pytest.raises(ValueError):
        finding("input_mutation", "m", advisory=True)  # no advisory form registered
    f = finding("timing_plausibility", "m", advisory=True)
    assert f.severity == "advisory"
    assert finding("constant_output", "m").severity == "fail"
    assert lookup("audit.process").severity == checks.Severity.ADVISORY  # the audit family
    with pytest.raises(ValueError):
        checks.register("input_mutation", checks.Severity.HACK, "again")
