"""Rich output without rich markup surprises: the one place that makes user text, code and
help text safe to print.

rich reads ``[...]`` in a printed string or a table cell as a markup tag and drops what it
takes for one: a finding's snippet ``_CACHE[key] = out`` printed as ``_CACHE = out``, the help
text ``pip install 'solbench[ray]'`` as ``pip install 'solbench'``. Every string that comes
from a file, a candidate, a log or a help text goes through :func:`escape_markup` (inside an
f-string printed with markup) or into a :class:`TextTable` cell (never parsed as markup);
deliberate styling is a :func:`styled` cell or markup written around escaped text.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text


def escape_markup(value: Any) -> str:
    """``str(value)`` with every ``[`` that rich could read as a tag escaped (``\\[``), for
    text printed by a markup-enabled console; ``None`` becomes ``""``."""
    return "" if value is None else escape(str(value))


def styled(text: Any, style: str = "") -> Text:
    """A table cell or printable of ``text`` shown verbatim in ``style`` (a rich style such
    as ``"red"``, ``"bold red"``; ``""`` for none)."""
    return Text("" if text is None else str(text), style=style)


def plain(value: Any) -> Any:
    """A renderable as given (``Text``, a table...), a string as verbatim :class:`Text`."""
    if isinstance(value, str):
        return Text(value)
    return value


class TextTable(Table):
    """A rich ``Table`` whose string cells, title and caption are shown verbatim: no markup
    is read from them, so a cell holding code, a path, a log line or a candidate's label
    prints exactly. Style a cell with :func:`styled`."""

    def __init__(self, *headers: Any, title: Any = None, caption: Any = None, **kwargs: Any) -> None:
        super().__init__(*headers, title=plain(title) if title is not None else None,
                         caption=plain(caption) if caption is not None else None, **kwargs)

    def add_column(self, header: Any = "", *args: Any, **kwargs: Any) -> None:  # noqa: D102
        super().add_column(plain(header), *args, **kwargs)

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:  # noqa: D102 - see the class
        super().add_row(*(plain(r) for r in renderables), **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("title", "caption") and isinstance(value, str):
            value = Text(value)
        super().__setattr__(name, value)


__all__ = ["TextTable", "escape_markup", "plain", "styled"]
