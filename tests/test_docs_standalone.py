"""The repository's documentation stands alone.

What the code and the docs cite must be a page of this repository's own docs/ folder, and a
section cited by name (``threats.md, "Trivial-candidate screen"``) must be a heading of that
page. Citations of the workspace's folder outside the clone, which a fresh clone lacks, fail.
Scanned: the tracked files under src/, docs/, bench/, tests/ and README.md (generated suite
data under src/solbench/suites/data is scanned too: its text names pages by bare name).
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCOPES = ("src", "docs", "bench", "tests", "README.md")
SKIP_SUFFIXES = {".png", ".jpg", ".pdf", ".gz", ".pt", ".safetensors", ".so", ".whl", ".pyc"}

#: the workspace folder beside the clone (written in two parts so this file does not match)
OUTSIDE = re.compile(r"(?:\.\./)?" + "shared" + r"/docs\b")
#: a page named by its docs/ path; not part of a longer path or URL (``x/docs/a.md``)
DOC_PATH = re.compile(r"(?<![\w/.\-])docs/([\w.\-]+\.md)\b")
#: a page named by its bare name as a citation: ``X.md, "Section"``, ``X.md principle 6``,
#: ``(X.md)``, ``see X.md`` (bench output names like ``"probes.md"`` are not citations)
NAME = r"([a-z][\w\-]*\.md)\b"
BARE_CITE = re.compile(
    r"(?<![\w/.\-\"'{}])" + NAME + r"(?=,?\s+\"|\s+(?:principle|rule|item|section)\b|\))"
    + r"|(?<=\()" + NAME
    + r"|(?<=[Ss]ee )" + NAME
)
#: ``X.md, "Section"`` or ``docs/X.md "Section"``: the quoted text must start a heading of X.md
SECTION = re.compile(r"(?<![\w.\-])(?:docs/)?([a-z][\w\-]*\.md),?\s+\"([^\"\n]+(?:\n[^\"\n]+)?)\"")


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *SCOPES], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode()
        files = [ROOT / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        files = [p for s in SCOPES for p in ((ROOT / s).rglob("*") if (ROOT / s).is_dir()
                                             else [ROOT / s])]
    me = Path(__file__).resolve()
    return [p for p in files if p.is_file() and p.resolve() != me and p.suffix not in SKIP_SUFFIXES]


def _texts() -> list[tuple[str, str]]:
    out = []
    for p in _tracked():
        try:
            out.append((str(p.relative_to(ROOT)), p.read_text(errors="replace")))
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def texts():
    t = _texts()
    assert len(t) > 100, "the scan found too few files: is ROOT the repository root?"
    return t


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _headings(page: str) -> list[str]:
    """Heading texts of a docs page, whitespace collapsed."""
    text = (DOCS / page).read_text()
    return [" ".join(m.group(1).split()) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.M)]


def test_nothing_cites_the_folder_outside_the_clone(texts):
    bad = [f"{path}:{_line(text, m.start())}: {m.group(0)}"
           for path, text in texts for m in OUTSIDE.finditer(text)]
    assert not bad, "cite docs/X.md of this repository instead:\n" + "\n".join(bad)


def test_every_cited_page_exists(texts):
    bad = []
    for path, text in texts:
        for rx in (DOC_PATH, BARE_CITE):
            for m in rx.finditer(text):
                page = next(g for g in m.groups() if g)
                if not (DOCS / page).is_file():
                    bad.append(f"{path}:{_line(text, m.start())}: {m.group(0)}")
    assert not bad, "cited pages missing from docs/:\n" + "\n".join(bad)


def test_every_cited_section_exists(texts):
    bad, seen = [], 0
    for path, text in texts:
        for m in SECTION.finditer(text):
            page, section = m.group(1), " ".join(m.group(2).split())
            if not (DOCS / page).is_file():
                bad.append(f"{path}:{_line(text, m.start())}: page {page} missing")
                continue
            seen += 1
            if not any(h.startswith(section) for h in _headings(page)):
                bad.append(f"{path}:{_line(text, m.start())}: no heading {section!r} in docs/{page}")
    assert not bad, "\n".join(bad)
    assert seen >= 5  # the code does cite sections: a regex that finds none is broken


def test_the_sections_the_code_relies_on():
    """The threat model and the formats page hold the sections cited by name across the code
    (some in wrapped text the scan above may not join), and the SOL-score section that
    ``sol/score.py`` names as its source."""
    need = {
        "threats.md": ["Principles", "Classes solbench must detect", "Static analysis",
                       "Trivial-candidate screen"],
        "formats.md": ["definition.json", "workload.jsonl", "Tolerance semantics", "solution.json",
                       "Trace", "SOL score", "KernelBench problems"],
    }
    for page, sections in need.items():
        heads = _headings(page)
        for s in sections:
            assert any(h.startswith(s) for h in heads), f"docs/{page}: no section {s!r}"


def test_threat_principles_are_numbered_one_to_eight():
    text = (DOCS / "threats.md").read_text()
    body = text.split("## Principles", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^(\d+)\. \*\*", body, re.M) == [str(i) for i in range(1, 9)]


def test_every_corpus_class_is_a_row_of_the_threat_table():
    """tests/adversarial/corpus.toml names the threats.md class each hostile candidate
    exercises: each must be a row of the classes table."""
    text = (DOCS / "threats.md").read_text()
    body = text.split("## Classes solbench must detect", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip() for line in body.splitlines()
            if line.startswith("|") and not line.startswith("|---")}
    manifest = tomllib.loads((ROOT / "tests" / "adversarial" / "corpus.toml").read_text())
    classes = {c["class"] for c in manifest["candidate"] if c["kind"] == "hostile"}
    assert classes and classes <= rows, sorted(classes - rows)


@pytest.mark.parametrize("sample, hits", [
    ('see ../' + 'shared/docs/threats.md, "Principles"', 1),
    ("(shared" + "/docs/sol-model.md item 8)", 1),
    ("docs/threats.md", 0),
])
def test_outside_pattern(sample, hits):
    assert len(OUTSIDE.findall(sample)) == hits


@pytest.mark.parametrize("sample, pages", [
    ('the screen (threats.md, "Trivial-candidate screen")', ["threats.md"]),
    ("threats.md principle 7", ["threats.md"]),
    ("a finding per formats.md)", ["formats.md"]),
    ("See formats.md.", ["formats.md"]),
    ('(args.out / "probes.md").write_text(x)', []),
    ("Writes OUT.json and OUT.md", []),
    ("https://github.com/x/y/blob/main/docs/other.md", []),
])
def test_citation_patterns(sample, pages):
    found = [next(g for g in m.groups() if g) for rx in (DOC_PATH, BARE_CITE)
             for m in rx.finditer(sample)]
    assert found == pages


def test_section_pattern_joins_wrapped_names():
    m = SECTION.search('(see docs/threats.md, "Trivial-candidate\n    screen")')
    assert m and m.group(1) == "threats.md" and " ".join(m.group(2).split()) == "Trivial-candidate screen"
