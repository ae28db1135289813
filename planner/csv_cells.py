"""CSV downloads that a spreadsheet cannot run: the one writer every CSV of the service goes through.

A spreadsheet reads a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula (and a leading tab or
carriage return can hide one): a GPU named ``=HYPERLINK("http://evil", "click")`` came out of the search
report's CSV verbatim, a link (or worse, ``=cmd|...``) in whoever opened it (issue 37 item 7, "CSV injection").

The rule (docs/api.md, "CSV downloads"):

- a **text** cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a ``'`` in front,
  which spreadsheets show as text and do not evaluate;
- **numbers stay numbers**: an ``int`` or ``float`` is written as it is (``-0.5``), and so is text that is
  exactly a decimal number (``-1.5``, ``+3``, ``-2.5e-05``: the figures a writer formatted itself), since a
  number cannot be a formula;
- everything else is written unchanged.

:func:`csv_writer` is ``csv.writer`` with that rule on every row; ``tests/planner/test_csv_cells.py`` checks that
no other module of the service calls ``csv.writer``.
"""

from __future__ import annotations

import csv
import re
from typing import Any

#: First characters a spreadsheet may read as the start of a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """``value``, or ``"'" + value`` for text a spreadsheet could run as a formula (numbers are left alone)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


class _SafeWriter:
    def __init__(self, writer) -> None:
        self._writer = writer

    def writerow(self, row):
        return self._writer.writerow([safe_cell(v) for v in row])

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


def csv_writer(buf, **kwargs) -> _SafeWriter:
    """``csv.writer(buf, **kwargs)`` whose rows go through :func:`safe_cell`."""
    return _SafeWriter(csv.writer(buf, **kwargs))
