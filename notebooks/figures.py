"""The course's figure helpers: code that only draws, kept out of the chapters.

A chapter cell computes what it teaches and then calls one of these to draw it, so the cell
shows the idea and not the matplotlib. Chapters ``import figures``: Jupyter and nbval run a
notebook in its own folder, and ``python notebooks/NN_slug.py`` puts that folder on the path.
Nothing here computes a result that a chapter checks.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

# -- chapter 7 -------------------------------------------------------------------------------


def draw_ring_schedule(ranks: int) -> Figure:
    """Which chunk each rank sends to its right-hand neighbour at every step of a ring
    all-reduce: ``R - 1`` steps of reduce-scatter (add), then ``R - 1`` of all-gather (copy)."""
    steps = 2 * (ranks - 1)
    fig, ax = plt.subplots(figsize=(1.3 * ranks + 1.5, 0.42 * steps + 1))
    colors = plt.cm.tab10(np.arange(ranks) % 10)
    for s in range(steps):
        gather = s >= ranks - 1
        k = s - (ranks - 1) if gather else s
        for r in range(ranks):
            chunk = (r + 1 - k) % ranks if gather else (r - k) % ranks
            ax.add_patch(plt.Rectangle((r + 0.05, steps - s - 0.95), 0.9, 0.9,
                                       color=colors[chunk], alpha=0.35 if gather else 0.8))
            ax.text(r + 0.5, steps - s - 0.5, f"c{chunk} {'copy' if gather else 'add'} → r"
                    f"{(r + 1) % ranks}", ha="center", va="center", fontsize=8)
    ax.set_xlim(0, ranks)
    ax.set_ylim(0, steps)
    ax.set_xticks(np.arange(ranks) + 0.5, [f"rank {r} sends" for r in range(ranks)])
    ax.set_yticks(np.arange(steps) + 0.5,
                  [f"{'gather' if s >= ranks - 1 else 'scatter'} step {s % (ranks - 1) + 1}"
                   for s in reversed(range(steps))])
    ax.set_title(f"ring all-reduce over {ranks} ranks: chunk c_k of every rank's array")
    fig.tight_layout()
    return fig


def draw_allreduce_cost(ranks: Sequence[int], curves: dict[str, Sequence[float]],
                        ylabel: str, title: str) -> Figure:
    """One line per strategy against the number of ranks."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in curves.items():
        ax.plot(ranks, values, "o-", label=name)
    ax.set(xlabel="ranks R", ylabel=ylabel, title=title, xticks=list(ranks))
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    return fig


def draw_overlap_timeline(backward: tuple[float, float], ready: dict[str, float],
                          lanes: dict[str, list[tuple[float, float]]]) -> Figure:
    """A timeline in milliseconds: the backward pass, when each gradient became ready, and for
    each strategy the intervals during which the link carries an all-reduce."""
    names = list(lanes)
    fig, ax = plt.subplots(figsize=(9, 0.7 * (len(names) + 1) + 1.2))
    ax.barh(len(names), backward[1] - backward[0], left=backward[0], color="0.75",
            label="backward (compute)")
    for name, t in ready.items():
        ax.plot([t, t], [len(names) - 0.4, len(names) + 0.4], color="k", lw=0.8)
        ax.text(t, len(names) + 0.45, name, rotation=60, fontsize=7, ha="left", va="bottom")
    for i, name in enumerate(names):
        for k, (a, b) in enumerate(lanes[name]):
            ax.barh(len(names) - 1 - i, b - a, left=a, color=plt.cm.tab10(k % 10), alpha=0.8,
                    edgecolor="k", lw=0.5)
        end = max(b for _, b in lanes[name])
        ax.text(end, len(names) - 1 - i, f"  done {end:.1f} ms", va="center", fontsize=8)
    ax.set_yticks(range(len(names) + 1), [*reversed(names), "backward"])
    ax.set_xlabel("time since backward started (ms)")
    ax.set_xlim(0, max(max(b for _, b in v) for v in lanes.values()) * 1.25)
    fig.tight_layout()
    return fig
