"""The course's figure helpers: code that only draws, kept out of the chapters.

A chapter cell computes what it teaches and then calls one of these to draw it, so the cell
shows the idea and not the matplotlib. Chapters ``import figures``: Jupyter and nbval run a
notebook in its own folder, and ``python notebooks/NN_slug.py`` puts that folder on the path.
Nothing here computes a result that a chapter checks.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes


def show(name: str) -> None:
    """``plt.show()``; with ``$TINYTRAIN_FIGURES`` set (a run without Jupyter, e.g. on the GPU
    machine), the figure is also saved there as ``name.png``."""
    folder = os.environ.get("TINYTRAIN_FIGURES")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        plt.savefig(Path(folder) / f"{name}.png", dpi=90, bbox_inches="tight")
    plt.show()


# -- chapter 4 -------------------------------------------------------------------------------


def draw_thread_owners(ax: Axes, owner: np.ndarray, block_dim: int, grid_dim: int,
                       title: str) -> None:
    """One cell per array element, coloured by the global thread that handled it; block
    boundaries of the first pass of the grid are marked."""
    threads = block_dim * grid_dim
    colors = plt.get_cmap("tab20")(np.arange(threads) % 20)
    for i, t in enumerate(owner):
        ax.add_patch(plt.Rectangle((i, 0), 1, 1, color=colors[t], ec="white"))
        ax.text(i + 0.5, 0.5, str(t), ha="center", va="center", fontsize=7)
    for b in range(0, owner.size + 1, threads):
        ax.axvline(b, color="black", lw=2)
    ax.set_xlim(0, owner.size)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xlabel("element i (thick lines: one pass of the whole grid)")
    ax.set_title(title, fontsize=10)


def draw_index_matrix(ax: Axes, index: np.ndarray, title: str, xlabel: str,
                      ylabel: str) -> None:
    """An integer matrix as a heat map with its values written in (-1 in grey: padding)."""
    shown = np.ma.masked_less(index, 0)
    ax.imshow(shown, cmap="viridis", aspect="auto")
    ax.imshow(np.ma.masked_greater_equal(index, 0), cmap="Greys", vmin=-2, vmax=0,
              aspect="auto")
    for (r, c), v in np.ndenumerate(index):
        ax.text(c, r, "pad" if v < 0 else str(v), ha="center", va="center", fontsize=6,
                color="white" if v >= 0 else "black")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def draw_warp_addresses(ax: Axes, addresses: dict[str, np.ndarray], segment: int) -> None:
    """The byte address each of a warp's 32 threads writes, per layout, with the memory
    segments (``segment`` bytes) they fall in."""
    for (label, addr), marker in zip(addresses.items(), "os^"):
        segments = len(set((addr // segment).tolist()))
        ax.plot(np.arange(addr.size), addr - addr.min(), marker, ms=4,
                label=f"{label}: {segments} segment(s) of {segment} B")
    ax.set_xlabel("thread of the warp (lane)")
    ax.set_ylabel("byte offset written")
    ax.set_yscale("symlog", linthresh=segment)
    ax.axhline(segment, color="grey", lw=0.8, ls="--")
    ax.legend(fontsize=8)


def draw_sum_orders(ax: Axes, sums: np.ndarray, exact: float) -> None:
    """The float32 results of one sum taken in many orders, against the exact value."""
    values, counts = np.unique(sums, return_counts=True)
    ax.bar((values - exact) / np.spacing(np.float32(exact)), counts, width=0.8)
    ax.set_xlabel("float32 result - exact sum, in units of the last place")
    ax.set_ylabel("orders giving it")
    ax.set_title(f"{sums.size} orders of the same numbers, {values.size} different results",
                 fontsize=10)
