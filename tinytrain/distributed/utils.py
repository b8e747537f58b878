"""Helpers for a training loop that runs on several ranks.

* :func:`shard_dataset`: this rank's disjoint part of a data set, for evaluation (every
  sample exactly once over all ranks; unlike :class:`~tinytrain.data.DistributedSampler`
  there is no padding, so shards may differ in length by one).
* :func:`sum_over_ranks`: add a few numbers over all ranks in one all-reduce, e.g. the
  (loss sum, correct, count) of a sharded evaluation. Averaging per-rank *accuracies* instead
  would be wrong whenever the shards differ in size.
"""

from __future__ import annotations

from collections.abc import Sized

import numpy as np

from tinytrain import distributed as dist
from tinytrain.data import Subset


def shard_dataset(dataset: Sized, rank: int | None = None,
                  world_size: int | None = None) -> Subset:
    """Samples ``rank, rank + R, rank + 2R, ...`` of ``dataset`` (``R`` = world size)."""
    if rank is None or world_size is None:
        rank, world_size = dist.get_rank(), dist.get_world_size()
    return Subset(dataset, np.arange(rank, len(dataset), world_size))


def sum_over_ranks(*values: float) -> list[float]:
    """Every rank's ``values`` added element-wise over all ranks, with one all-reduce.

    Summed in float64, so integer counts stay exact up to 2**53.
    """
    import tinytrain as tt

    g = dist.group("sum_over_ranks")
    totals = tt.tensor(np.asarray(values, dtype=np.float64), device=g.device)
    dist.all_reduce(totals, "sum")
    return [float(v) for v in totals.numpy()]
