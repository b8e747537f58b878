"""``tt.return_types``: the named tuples that some reductions return, as ``torch.return_types``.

    values, indices = x.max(1)            # a tuple ...
    x.max(1).indices                      # ... whose parts have names
    print(x.max(1))                       # tinytrain.return_types.max(
                                          # values=tensor([3., 4.]),
                                          # indices=tensor([1, 0]))

Each is a :func:`collections.namedtuple` (so also ``_fields``, ``_asdict``) of the op's name,
printed as PyTorch prints its own (one field a line), under this module's name where PyTorch
writes ``torch.return_types``.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

__all__ = ["cummax", "cummin", "histogram", "kthvalue", "max", "median", "min", "nanmedian",
           "sort", "topk"]


def _return_type(name: str, fields: tuple[str, ...]) -> type:
    def __repr__(self: Any) -> str:
        body = ",\n".join(f"{field}={value!r}" for field, value in zip(self._fields, self))
        return f"tinytrain.return_types.{name}(\n{body})"

    return type(name, (namedtuple(name, fields),),
                {"__slots__": (), "__repr__": __repr__, "__module__": __name__,
                 "__doc__": f"What ``{name}`` returns: ``({', '.join(fields)})``."})


_PAIR = ("values", "indices")
max = _return_type("max", _PAIR)  # noqa: A001
min = _return_type("min", _PAIR)  # noqa: A001
sort = _return_type("sort", _PAIR)
topk = _return_type("topk", _PAIR)
median = _return_type("median", _PAIR)
nanmedian = _return_type("nanmedian", _PAIR)
kthvalue = _return_type("kthvalue", _PAIR)
cummax = _return_type("cummax", _PAIR)
cummin = _return_type("cummin", _PAIR)
histogram = _return_type("histogram", ("hist", "bin_edges"))
