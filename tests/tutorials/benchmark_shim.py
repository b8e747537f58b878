"""A test-only stand-in for ``torch.utils.benchmark.Timer`` in the tutorial copies next to this
file (the ``torch.func`` tutorials time their loops against ``vmap``).

Benchmarks are not what the tests compare, and the tinytrain and PyTorch runs must not take
minutes: ``Timer(stmt, globals=...).timeit(number)`` runs ``stmt`` *once* (not ``number``
times), so the program's code still runs and its errors still show, and returns a
:class:`Measurement` of that one run, printed in PyTorch's layout. :data:`runs` records each
statement run, for the tests.
"""

from __future__ import annotations

import time
from typing import Any

#: The statements run since the test emptied it.
runs: list[str] = []


class Measurement:
    """One timing: ``times`` (seconds per run, one entry), ``mean``, ``median``."""

    def __init__(self, stmt: str, seconds: float, number: int) -> None:
        self.stmt, self.times, self.number_per_run = stmt, [seconds], number

    @property
    def mean(self) -> float:
        return self.times[0]

    median = mean

    def __repr__(self) -> str:
        ms = self.times[0] * 1e3
        return (f"<benchmark_shim.Measurement object at {id(self):#x}>\n{self.stmt}\n"
                f"  {ms:.2f} ms\n  1 measurement, 1 runs (the shim's; {self.number_per_run} "
                f"asked) , 1 thread")

    __str__ = __repr__


class Timer:
    def __init__(self, stmt: str = "pass", setup: str = "pass", globals: dict | None = None,
                 label: str | None = None, **kwargs: Any) -> None:
        self.stmt, self.setup = stmt, setup
        self.globals = dict(globals or {})

    def timeit(self, number: int = 1000000) -> Measurement:
        exec(self.setup, self.globals)
        runs.append(self.stmt)
        start = time.perf_counter()
        exec(self.stmt, self.globals)
        return Measurement(self.stmt, time.perf_counter() - start, number)
