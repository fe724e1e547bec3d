"""Claims ledger formatting: a row stays one row of five cells whatever its text holds."""

import re

from specmem.claims import Claim, table_row


def test_pipes_in_cells_are_escaped():
    row = table_row(7, Claim("VLA ||S||_F < 15", "seed 003", "max ||S_t||_F = 32.3", "fails"))
    unescaped = re.findall(r"(?<!\\)\|", row)
    assert len(unescaped) == 6, row
    assert row.endswith("| **fails** |")
