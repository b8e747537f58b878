"""The course's figure helpers: code that only draws, kept out of the chapters.

A chapter cell computes what it teaches and then calls one of these to draw it, so the cell
shows the idea and not the matplotlib. Chapters ``import figures``: Jupyter and nbval run a
notebook in its own folder, and ``python notebooks/NN_slug.py`` puts that folder on the path.
Nothing here computes a result that a chapter checks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle


def _address(arr: np.ndarray) -> int:
    """The address of ``arr``'s first element."""
    return arr.__array_interface__["data"][0]


def _grid_axes(ax: Axes, rows: int, cols: int) -> None:
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def show(name: str) -> None:
    """``plt.show()``; with ``$TINYTRAIN_FIGURES`` set (a run without Jupyter, e.g. on the GPU
    machine), the figure is also saved there as ``name.png``."""
    folder = os.environ.get("TINYTRAIN_FIGURES")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        plt.savefig(Path(folder) / f"{name}.png", dpi=90, bbox_inches="tight")
    plt.show()


# -- chapter 0 -------------------------------------------------------------------------------


def draw_first_run(losses: Sequence[float], images: np.ndarray, labels: np.ndarray,
                   predicted: np.ndarray) -> Figure:
    """The loss of every training step, and test digits ``images`` [n, 28, 28] with the
    model's guesses (a wrong one in red, with the true label)."""
    n = len(images)
    fig = plt.figure(figsize=(11, 3.4))
    grid = fig.add_gridspec(2, 3 + (n + 1) // 2)
    ax = fig.add_subplot(grid[:, :3])
    ax.plot(np.arange(1, len(losses) + 1), losses, lw=1)
    ax.axhline(np.log(10), color="gray", ls="--", lw=0.8, label="ln 10: guessing")
    ax.set(xlabel="training step", ylabel="loss", title="training loss")
    ax.legend()
    for i in range(n):
        img = fig.add_subplot(grid[i % 2, 3 + i // 2])
        img.imshow(images[i], cmap="gray_r")
        right = predicted[i] == labels[i]
        img.set_title(f"guess {predicted[i]}" + ("" if right else f", is {labels[i]}"),
                      fontsize=9, color="black" if right else "red")
        img.axis("off")
    fig.tight_layout()
    return fig


# -- chapter 1 -------------------------------------------------------------------------------


def draw_memory_grid(ax: Axes, arr: np.ndarray, base: np.ndarray, title: str,
                     show_meta: bool = True) -> None:
    """Draw the 2-D view ``arr`` of ``base``'s buffer: each cell shows its value and the byte
    offset (from ``base``'s first element) where it lives, coloured by that offset."""
    cmap = plt.get_cmap("viridis")
    nbytes = base.size * base.itemsize
    rows, cols = arr.shape
    for i in range(rows):
        for j in range(cols):
            off = _address(arr) - _address(base) + i * arr.strides[0] + j * arr.strides[1]
            ax.add_patch(Rectangle((j, rows - 1 - i), 1, 1, facecolor=cmap(off / nbytes),
                                   edgecolor="white", lw=2))
            ax.text(j + 0.5, rows - 1 - i + 0.6, f"{arr[i, j]:.0f}", ha="center",
                    va="center", fontsize=14, color="white", weight="bold")
            ax.text(j + 0.5, rows - 1 - i + 0.25, f"byte {off}", ha="center", va="center",
                    fontsize=8, color="white")
    _grid_axes(ax, rows, cols)
    ax.set_title(f"{title}\nshape {arr.shape}, strides {arr.strides}" if show_meta else title,
                 fontsize=10)


def _draw_values(ax: Axes, arr: np.ndarray, title: str,
                 ghost_shape: tuple[int, int] | None = None) -> None:
    """Draw ``arr``; with ``ghost_shape``, also its broadcast copies, faded."""
    shown = np.broadcast_to(arr, ghost_shape) if ghost_shape else arr
    rows, cols = shown.shape
    for i in range(rows):
        for j in range(cols):
            real = i < arr.shape[0] and j < arr.shape[1]
            ax.add_patch(Rectangle((j, rows - 1 - i), 1, 1, edgecolor="black",
                                   facecolor="tab:blue" if real else "lightsteelblue",
                                   alpha=1.0 if real else 0.5))
            ax.text(j + 0.5, rows - 0.5 - i, f"{shown[i, j]:.0f}", ha="center", va="center",
                    color="white" if real else "black", fontsize=12)
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10)


def draw_broadcast_sum(col: np.ndarray, row: np.ndarray) -> Figure:
    """Draw ``col (m, 1) + row (1, n) = (m, n)``, with the broadcast copies faded."""
    shape = (col.shape[0], row.shape[1])
    fig, axes = plt.subplots(1, 5, figsize=(11, 3),
                             gridspec_kw={"width_ratios": [4, 1, 4, 1, 4]})
    _draw_values(axes[0], col, f"col {col.shape}\nstretched along axis 1", ghost_shape=shape)
    _draw_values(axes[2], row, f"row {row.shape}\nstretched along axis 0", ghost_shape=shape)
    _draw_values(axes[4], col + row, f"col + row {shape}")
    for ax, symbol in [(axes[1], "+"), (axes[3], "=")]:
        ax.text(0.5, 0.5, symbol, fontsize=28, ha="center", va="center")
        ax.axis("off")
    return fig


def draw_timings(ax: Axes, sizes: Sequence[float], times: dict[str, Sequence[float]],
                 xlabel: str, title: str) -> None:
    """Seconds per call against size, log-log: one line per entry of ``times`` (views solid,
    names starting with "copy" dashed)."""
    for name, seconds in times.items():
        ax.loglog(sizes, seconds, "o" + ("--" if name.startswith("copy") else "-"), label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("seconds per call")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def draw_leading_dimension(ax_flat: Axes, ax_grid: Axes, rows: int, cols: int, k: int,
                           n: int) -> None:
    """An ``rows x cols`` matrix and its window of ``n`` columns from column ``k``: on top the
    flat buffer (the window's elements coloured, ``lda = cols`` apart), below the grid."""
    inside = np.zeros((rows, cols), dtype=bool)
    inside[:, k:k + n] = True
    for ax, grid, label in [(ax_flat, inside.reshape(1, -1), "the buffer"),
                            (ax_grid, inside, "the matrix")]:
        h, w = grid.shape
        for i in range(h):
            for j in range(w):
                ax.add_patch(Rectangle((j, h - 1 - i), 1, 1, edgecolor="white", lw=1,
                                       facecolor="tab:orange" if grid[i, j] else "lightgray"))
                ax.text(j + 0.5, h - 0.5 - i, str(i * w + j), ha="center", va="center",
                        fontsize=6 if h == 1 else 9)
        _grid_axes(ax, h, w)
        ax.set_ylabel(label, fontsize=9)
    ax_flat.annotate("", xy=(k + cols, 1.35), xytext=(k, 1.35), annotation_clip=False,
                     arrowprops={"arrowstyle": "<->", "color": "black"})
    ax_flat.text(k + cols / 2, 1.6, f"lda = {cols}", ha="center", fontsize=9)
    ax_grid.set_title(f"window [:, {k}:{k + n}]: offset {k}, shape ({rows}, {n}), "
                      f"strides ({cols}, 1)", fontsize=10)


# -- chapter 2 -------------------------------------------------------------------------------


def draw_graph(root: Any, ax: Axes, box_w: float = 1.05, box_h: float = 0.75,
               dx: float = 1.55) -> None:
    """Draw the graph of chapter 2's scalar ``Value`` ``root`` (anything with ``data``,
    ``grad``, ``label``, ``_op`` and ``_prev``), the output on the right.

    Each node sits one column left of its leftmost consumer and near its consumers' height;
    arrows follow the forward pass.
    """
    topo: list[Any] = []
    seen: set[int] = set()

    def build(v: Any) -> None:
        if id(v) not in seen:
            seen.add(id(v))
            for child in v._prev:
                build(child)
            topo.append(v)

    build(root)
    consumers: dict[Any, list[Any]] = {v: [] for v in topo}
    for v in topo:
        for child in v._prev:
            consumers[child].append(v)
    dist = {root: 0}  # column = longest distance to the output
    for v in reversed(topo):
        for child in v._prev:
            dist[child] = max(dist.get(child, 0), dist[v] + 1)
    pos = {root: (0.0, 0.0)}
    for d in range(1, max(dist.values()) + 1):
        column = [v for v in topo if dist[v] == d]
        want = {v: float(np.mean([pos[c][1] for c in consumers[v]])) for v in column}
        column.sort(key=lambda v: want[v])
        ys = [want[v] for v in column]
        for i in range(1, len(ys)):  # keep boxes apart
            ys[i] = max(ys[i], ys[i - 1] + box_h * 1.35)
        shift = np.mean([want[v] for v in column]) - np.mean(ys)
        for v, y in zip(column, ys):
            pos[v] = (-d * dx, y + shift)
    for v in topo:
        x, y = pos[v]
        for child in v._prev:
            cx, cy = pos[child]
            ax.annotate("", xy=(x - box_w / 2, y), xytext=(cx + box_w / 2, cy),
                        arrowprops={"arrowstyle": "->", "color": "gray", "lw": 1.2})
        leaf = not v._prev
        ax.add_patch(Rectangle((x - box_w / 2, y - box_h / 2), box_w, box_h,
                               facecolor="#dbe9f6" if leaf else "#fde2c4",
                               edgecolor="black", lw=1))
        title = v.label if leaf else f"{v.label}  [{v._op}]"
        ax.text(x, y, f"{title}\ndata {v.data:+.3f}\ngrad {v.grad:+.3f}", ha="center",
                va="center", fontsize=8, family="monospace")
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - box_w, max(xs) + box_w)
    ax.set_ylim(min(ys) - box_h, max(ys) + box_h)
    ax.set_aspect("equal")
    ax.axis("off")


def draw_loss_curves(ax_loss: Axes, ax_gap: Axes, losses: dict[str, Sequence[float]],
                     gaps: dict[str, Sequence[float]]) -> None:
    """Loss per step for each implementation (left, dashed so that overlapping curves stay
    visible) and each one's absolute difference from the first (right, log scale)."""
    styles = ["-", "--", ":"]
    for (name, curve), style in zip(losses.items(), styles):
        ax_loss.plot(curve, style, lw=2.5 if style == "-" else 1.5, label=name)
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy loss")
    ax_loss.set_title("training loss, same initial weights", fontsize=10)
    ax_loss.legend()
    ax_loss.grid(True, alpha=0.3)
    first = next(iter(losses))
    for name, gap in gaps.items():
        gap = np.asarray(gap)
        steps = np.flatnonzero(gap)  # a log scale has no 0: equal steps are counted instead
        ax_gap.semilogy(steps, gap[steps], ".", ms=3,
                        label=f"{name} vs {first} ({len(gap) - len(steps)} steps equal)")
    ax_gap.set_xlabel("step")
    ax_gap.set_ylabel("|difference in loss|")
    ax_gap.set_title("rounding differences", fontsize=10)
    ax_gap.legend()
    ax_gap.grid(True, which="both", alpha=0.3)


# -- chapter 3 -------------------------------------------------------------------------------


def draw_number_grid(ax: Axes, a: np.ndarray, title: str,
                     highlight: tuple[tuple[int, int], tuple[int, int]] | None = None,
                     color: str = "tab:orange") -> None:
    """Draw the 2-D array ``a`` as a table of numbers; ``highlight=((row, col), (h, w))``
    frames an ``h x w`` window whose top-left cell is ``(row, col)``."""
    ax.imshow(np.zeros_like(a), cmap="Greys", vmin=0, vmax=1)
    for (r, c), v in np.ndenumerate(a):
        ax.text(c, r, f"{v:g}", ha="center", va="center", fontsize=9)
    ax.set_xticks(np.arange(-0.5, a.shape[1]), minor=True)
    ax.set_yticks(np.arange(-0.5, a.shape[0]), minor=True)
    ax.grid(which="minor", color="0.7")
    ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    if highlight is not None:
        (r, c), (h, w) = highlight
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), w, h, fill=False, lw=3, ec=color))
    ax.set_title(title)


def draw_column_shift(hp: int, wp: int, kh: int, kw: int, pad: int,
                      offset: tuple[int, int]) -> Figure:
    """The column-shift trick on one padded ``hp x wp`` image (one channel, one image).

    Left: each pixel labelled with its column in the matrix ``[Cin, N*Hp*Wp]`` (padding
    grey); the dashed frame holds the grid positions that are real outputs, the orange
    frame what kernel offset ``(i, j)`` reads for them. Right: for every computed grid
    column ``c``, the column that offset ``(0, 0)`` reads (``c``) and the column that offset
    ``(i, j)`` reads (``c + i*Wp + j``); grid columns that are not outputs are grey.
    """
    i, j = offset
    shift = i * wp + j
    ho, wo = hp - kh + 1, wp - kw + 1
    cols = hp * wp - ((kh - 1) * wp + kw - 1)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 3.4),
                                   gridspec_kw={"width_ratios": [wp, 0.8 * (cols + 6)]})
    padding = np.ones((hp, wp))
    padding[pad:hp - pad, pad:wp - pad] = 0
    ax0.imshow(padding, cmap="Greys", vmin=0, vmax=4)
    for (r, c), _ in np.ndenumerate(padding):
        ax0.text(c, r, r * wp + c, ha="center", va="center", fontsize=9)
    ax0.add_patch(Rectangle((-0.5, -0.5), wo, ho, fill=False, lw=2, ls="--", ec="tab:blue"))
    ax0.add_patch(Rectangle((j - 0.5, i - 0.5), wo, ho, fill=False, lw=3, ec="tab:orange"))
    ax0.set_xticks([])
    ax0.set_yticks([])
    ax0.set_title(f"padded {hp}x{wp} image: column of each pixel", fontsize=10)
    c = np.arange(cols)
    real = (c % wp < wo) & (c // wp < ho)
    rows = [("grid column c", c, "tab:blue"), ("offset (0, 0) reads", c, "0.5"),
            (f"offset {offset} reads", c + shift, "tab:orange")]
    for r, (label, values, color) in enumerate(rows):
        for k, v in enumerate(values):
            face = "0.85" if not real[k] else ("white" if r else "#dbe8f5")
            ax1.add_patch(Rectangle((k, -r - 1), 1, 1, fc=face, ec="0.6"))
            ax1.text(k + 0.5, -r - 0.5, v, ha="center", va="center", fontsize=9, color=color)
        ax1.text(-0.3, -r - 0.5, label, ha="right", va="center", fontsize=9)
    ax1.set_xlim(-6, cols)
    ax1.set_ylim(-len(rows) - 0.2, 0.2)
    ax1.set_aspect("equal")
    ax1.axis("off")
    ax1.set_title(f"offset {offset} = the same columns shifted by {i}*{wp} + {j} = {shift}",
                  fontsize=10)
    return fig


def draw_thread_bars(ax: Axes, times: dict[str, dict[int, float]], title: str) -> None:
    """Horizontal bars, one group per version, one bar per thread count: ``times[name][n]``
    is a time in milliseconds on ``n`` threads (log scale)."""
    names = list(times)
    counts = sorted({n for per in times.values() for n in per})
    height = 0.8 / len(counts)
    for k, n in enumerate(counts):
        ys = [y + k * height for y, name in enumerate(names) if n in times[name]]
        vals = [times[name][n] for name in names if n in times[name]]
        bars = ax.barh(ys, vals, height=height, label=f"{n} thread{'s' * (n > 1)}")
        ax.bar_label(bars, fmt="%.1f", padding=2, fontsize=7)
    ax.set_yticks(np.arange(len(names)) + 0.4 - height / 2, names, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(right=3 * max(t for per in times.values() for t in per.values()))
    ax.set_xlabel("ms (best of 3)")
    ax.set_title(title, fontsize=9)
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="lower right")


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


# -- chapter 5 -------------------------------------------------------------------------------


def draw_shards(ax: Axes, shards: Sequence[Any], n: int, title: str) -> None:
    """Draw which rank gets which of the indices ``0 .. n-1``: one square per index in its
    rank's colour (white: nobody's this epoch), and padding repeats hatched below it.

    ``shards``: one ``DistributedSampler`` per rank, in rank order.
    """
    colors = plt.get_cmap("tab10").colors
    owner = np.full(n, -1)
    repeats = []
    for r, s in enumerate(shards):
        for idx, pad in zip(s.indices(), s.padding_mask()):
            if pad:
                repeats.append((idx, r))
            else:
                owner[idx] = r
    for idx in range(n):
        color = colors[owner[idx]] if owner[idx] >= 0 else "white"
        ax.add_patch(Rectangle((idx, 0), 0.95, 0.95, color=color, ec="gray"))
        ax.text(idx + 0.47, 0.45, str(idx), ha="center", va="center", fontsize=8)
    for idx, r in repeats:  # padding: a second copy, drawn below in the rank's colour
        ax.add_patch(Rectangle((idx, -0.55), 0.95, 0.45, color=colors[r], hatch="//",
                               alpha=0.6))
    ax.set_xlim(0, n)
    ax.set_ylim(-0.6, 1)
    ax.axis("off")
    ax.set_title(title, fontsize=9)


def rank_legend(fig: Figure, ranks: int) -> None:
    """A legend of the colours :func:`draw_shards` gives ranks ``0 .. ranks-1``."""
    colors = plt.get_cmap("tab10").colors
    handles = [Rectangle((0, 0), 1, 1, color=colors[r]) for r in range(ranks)]
    fig.legend(handles, [f"rank {r}" for r in range(ranks)], loc="lower center", ncol=ranks)


# -- chapter 6 -------------------------------------------------------------------------------


def draw_confusion(ax: Axes, confusion: np.ndarray, title: str) -> None:
    """Draw a confusion matrix (row: true class, column: predicted), counts written in."""
    ax.imshow(np.log1p(confusion), cmap="Blues")
    k = confusion.shape[0]
    for t in range(k):
        for p in range(k):
            if confusion[t, p]:
                ax.text(p, t, confusion[t, p], ha="center", va="center", fontsize=8,
                        color="white" if t == p else "black")
    ax.set(xticks=range(k), yticks=range(k), xlabel="predicted", ylabel="true", title=title)


def draw_filters(before: np.ndarray, after: np.ndarray) -> Figure:
    """Draw 16 single-channel filters ``[16, 1, kh, kw]`` before (top two rows) and after
    (bottom two rows) training, on one colour scale (blue positive, red negative)."""
    lim = np.abs(after).max()
    fig, axes = plt.subplots(4, 8, figsize=(9, 5))
    for k in range(16):
        for row, (weights, when) in enumerate([(before, "initial"), (after, "trained")]):
            ax = axes[2 * row + k // 8, k % 8]
            ax.imshow(weights[k, 0], cmap="RdBu", vmin=-lim, vmax=lim)
            ax.set_title(f"{when} {k}", fontsize=8)
            ax.axis("off")
    return fig


def draw_feature_maps(image: np.ndarray, title: str, maps: np.ndarray) -> Figure:
    """Draw an input image ``[H, W]`` and 16 feature maps ``[16, H', W']`` of it."""
    fig, axes = plt.subplots(2, 9, figsize=(10, 2.8))
    axes[0, 0].imshow(image, cmap="gray_r")
    axes[0, 0].set_title(title, fontsize=8)
    axes[1, 0].axis("off")
    for k in range(16):
        ax = axes.flat[1 + k + (k >= 8)]
        ax.imshow(maps[k], cmap="viridis")
        ax.set_title(f"map {k}", fontsize=8)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


def draw_loss_overlay(ours: Sequence[float], theirs: Sequence[float], title: str) -> Figure:
    """Two training-loss curves, step by step (left), and their absolute difference (right)."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    steps = np.arange(1, len(ours) + 1)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.2))
    ax0.plot(steps, ours, lw=2.5, alpha=0.6, label="tinytrain")
    ax0.plot(steps, theirs, lw=1, color="k", ls="--", label="PyTorch")
    ax0.set(xlabel="step", ylabel="training loss", yscale="log", title=title)
    ax0.legend()
    ax1.semilogy(steps, np.maximum(np.abs(ours - theirs), 1e-9), ".-", lw=0.8, color="tab:red")
    ax1.set(xlabel="step", ylabel="|tinytrain - PyTorch|",
            title="difference of the two losses (1e-9 where equal)")
    return fig


def draw_layer_profile(ax: Axes, labels: Sequence[str], forward: Sequence[float],
                       backward: Sequence[float]) -> None:
    """One bar per layer call: forward time, then backward time stacked on it (ms)."""
    y = np.arange(len(labels))
    ax.barh(y, forward, label="forward", color="tab:blue")
    ax.barh(y, backward, left=forward, label="backward", color="tab:orange")
    for k, (f, b) in enumerate(zip(forward, backward)):
        ax.text(f + b, k, f" {f + b:.1f}", va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("ms per training step (median)")
    ax.legend(loc="lower right")


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
                          lanes: dict[str, list[tuple[float, float]]],
                          label_every: int = 1) -> Figure:
    """A timeline in milliseconds: the backward pass, when each gradient became ready (every
    ``label_every``-th one named), and for each strategy the intervals during which the link
    carries an all-reduce."""
    names = list(lanes)
    fig, ax = plt.subplots(figsize=(9, 0.7 * (len(names) + 1) + 1.2))
    ax.barh(len(names), backward[1] - backward[0], left=backward[0], color="0.75",
            label="backward (compute)")
    for k, (name, t) in enumerate(ready.items()):
        ax.plot([t, t], [len(names) - 0.4, len(names) + 0.4], color="k", lw=0.8)
        if k % label_every == 0:
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
