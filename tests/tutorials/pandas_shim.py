"""A test-only stand-in for the part of pandas PyTorch's data tutorial uses (pandas is not
installed here): ``read_csv`` of a header-less two-column file, and ``.iloc[row, column]``
and ``len`` of the result."""

from __future__ import annotations

import csv


class _Frame:
    def __init__(self, rows: list[list[str]]) -> None:
        self.rows = rows
        self.iloc = self

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, where: tuple[int, int]) -> object:
        row, column = where
        value = self.rows[row][column]
        return int(value) if value.lstrip("-").isdigit() else value


def read_csv(path: str) -> _Frame:
    with open(path, newline="") as f:
        return _Frame([row for row in csv.reader(f) if row])
