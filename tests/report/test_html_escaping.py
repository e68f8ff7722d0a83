"""The HTML report never emits a candidate-controlled string as markup (a candidate's file
name or solution name is its label; a script there would run in the reader's browser and could
rewrite every number shown)."""

from solbench.report.html import Html, _table


def test_plain_cells_are_escaped_even_when_they_look_like_markup():
    evil = "<img src=x onerror=document.body.innerHTML='PASSED_1000x'>"
    out = _table(["candidate", "status"], [[evil, Html("<span class=PASSED>PASSED</span>")]])
    assert "<img" not in out and "&lt;img src=x onerror=" in out
    assert "<span class=PASSED>PASSED</span>" in out  # markup built by the report itself stays


def test_a_str_subclass_other_than_html_is_escaped():
    class Sneaky(str):
        pass

    assert "<script>" not in _table(["a"], [[Sneaky("<script>alert(1)</script>")]])
