"""``python -m tinytrain.train``: train an MNIST model, the course's main job.

    python -m tinytrain.train                          # the default recipe (convnet, Adam, cosine)
    python -m tinytrain.train --preset infinitrain     # InfiniTrain's run: cnn, SGD lr 0.01
    python -m tinytrain.train --model mlp --epochs 3 --save runs/mlp.npz
    python -m tinytrain.train --nproc 2                # 2 processes (mpiexec), data-parallel
    mpiexec -n 2 python -m tinytrain.train             # the same, started by hand

The step is always ``zero_grad -> forward (model(x)) -> loss -> backward -> step``;
evaluation runs under ``no_grad``. The work is split in small steps: :func:`resolve_config`
(every option, from the flags, a resumed checkpoint, the preset and the defaults, validated),
:func:`prepare_outputs` (``--save`` / ``--plot`` checked before any training),
:func:`open_datasets`, :func:`train_one_epoch`, :func:`save_checkpoint`, and :func:`run`, which
strings them together.

**Checkpoints.** ``--save`` writes the model, optimizer, schedule, RNG state, history and the
run's settings (data set, model, batch size, seed, optimizer and learning rate, momentum,
schedule, epochs) atomically at the end of every epoch. ``--resume`` continues such a run up to
its ``--epochs`` and gives the same weights as an uninterrupted run. A setting not given on
resume is taken from the checkpoint (the command prints which); one given explicitly must equal
the checkpoint's, else the command stops with one line naming it. The exception is ``--epochs``
of a constant-rate run, which may be raised to train longer; a cosine schedule's horizon is
part of its rates, so it cannot change.

**Nothing silently wrong, nothing lost.**

* Every flag and every field of a resumed checkpoint is checked before any work: a bad one is
  one line on stderr and exit status 2 (no traceback).
* Output paths are checked up front. ``--save`` and ``--plot`` each name a file (not a folder,
  not a device) in a folder that exists or can be created and is writable, and they differ.
  ``--save`` may be the ``--resume`` file (the run continues in place: the file is replaced
  only once the next epoch is done) and may replace an earlier checkpoint, but no other kind
  of file. ``--plot``'s format is its suffix (``.png``, ``.pdf``, ``.svg``, ... what matplotlib
  writes) and it never replaces a checkpoint.
* A non-finite training loss stops the run with exit status 1 before anything more is saved,
  and weights or optimizer state that are not finite are never saved: the last good checkpoint
  stays. It is checked on each logged window's mean, which costs no extra device sync.
* Ctrl-C (exit 130) and SIGTERM (exit 143: 128 + the signal's number, what a shell reports for
  a process the signal killed, so schedulers see why it ended) stop the run the same way: a
  save in progress is abandoned, leaving the previous checkpoint and no temporary file (or,
  interrupted after its file was renamed into place, complete; the message names the epoch
  the file holds).
* A write that fails (full disk, permissions changed) is one line and exit status 1; the
  previous checkpoint is intact.

**Several processes.** Under ``mpiexec`` (or ``--nproc N``) every process is a rank of a
data-parallel run (:mod:`tinytrain.distributed`): each trains on its shard of every epoch
(``DistributedSampler``) with ``--batch-size`` samples per step, so the global batch is
``--batch-size`` x ranks; ``DistributedDataParallel`` averages the gradients (MPI between CPU
ranks, NCCL between GPUs, one per rank). Evaluation is sharded and reduced once per epoch.
Rank 0 alone checks the outputs, prints, plots and saves; the checkpoint records the number
of ranks and every rank's RNG, so it resumes bit-exactly on as many ranks and continues on any
other number (at the same epoch of the schedule). A rank that stops with an error, Ctrl-C or
SIGTERM stops every rank (the functions under "several processes" below).
"""

from __future__ import annotations

import argparse
import gc
import io
import math
import os
import signal
import sys
import threading
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import optim
from tinytrain.backend import get_array_module
from tinytrain.data import DataLoader, DistributedSampler
from tinytrain.data.datasets import (
    DATASETS,
    CorruptDataError,
    DataFileError,
    DownloadError,
    MissingDataError,
    load_dataset,
)
from tinytrain.data.idx import atomic_file, replaceable_target, temp_path_for
from tinytrain.distributed import launch
from tinytrain.models import MODELS, build_model

# InfiniTrain's own MNIST run: plain SGD, lr 0.01, batch 64, one epoch.
PRESETS: dict[str, dict[str, Any]] = {
    "infinitrain": dict(model="cnn", optimizer="sgd", lr=0.01, momentum=0.0, batch_size=64,
                        epochs=1, schedule="constant"),
}
DEFAULTS: dict[str, Any] = dict(model="convnet", optimizer="adam", lr=None, momentum=0.9,
                                batch_size=64, epochs=1, schedule="cosine", seed=0,
                                log_every=20, eval_batch_size=1000)
DEFAULT_LR = {"adam": 2e-3, "sgd": 0.05}
OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("constant", "cosine")
CHECKPOINT_FORMAT = 2
#: The settings that decide the weights: recorded in every checkpoint, checked on resume.
SETTINGS = ("dataset", "model", "batch_size", "seed", "optimizer", "lr", "momentum",
            "schedule", "epochs")
#: Optimizer state per parameter, by optimizer (SGD keeps none without momentum).
OPTIMIZER_STATE = {"adam": {"step", "exp_avg", "exp_avg_sq"}, "sgd": {"momentum_buffer"}}


class UsageError(Exception):
    """Bad command-line input or a checkpoint that cannot be resumed: one line, exit status 2."""


class RunError(Exception):
    """The run failed (diverged, or a write failed): one line, exit status 1."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that the same cleanup runs."""

    forward_signal = signal.SIGTERM  # what --nproc passes on to mpiexec


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


# --------------------------------------------------------------------------- options


def _positive_int(v: Any) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
    return None if ok else "must be a positive integer"


def _non_negative_int(v: Any) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
    return None if ok else "must be an integer >= 0"


def _seed(v: Any) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64
    return None if ok else "must be an integer in [0, 2**64)"


def _positive_float(v: Any) -> str | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return None if ok else "must be a positive finite number"


def _momentum(v: Any) -> str | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 1
    return None if ok else "must be a number in [0, 1)"


def _one_of(names: Any) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        return None if v in names else f"must be one of {', '.join(sorted(names))}"

    return check


#: What a valid value of each option is; used for the flags and for a checkpoint's settings.
VALIDATORS: dict[str, Callable[[Any], str | None]] = {
    "dataset": _one_of(DATASETS), "model": _one_of(MODELS), "optimizer": _one_of(OPTIMIZERS),
    "schedule": _one_of(SCHEDULES), "batch_size": _positive_int, "epochs": _positive_int,
    "seed": _seed, "lr": _positive_float, "momentum": _momentum,
    "log_every": _positive_int, "eval_batch_size": _positive_int,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own errors: one line too
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m tinytrain.train",
        description="Train an MNIST model with tinytrain and report its test accuracy.",
    )
    p.add_argument("--model", choices=sorted(MODELS), default=None,
                   help="network to train (default: convnet; the infinitrain preset: cnn)")
    p.add_argument("--dataset", choices=sorted(DATASETS), default=None,
                   help="data set (default: mnist, falling back to the bundled mnist-mini with "
                        "a warning when full MNIST is absent from the default data root and "
                        "cannot be downloaded)")
    p.add_argument("--data-dir", default=None,
                   help="data root holding mnist/ and fashion-mnist/ (default: $TINYTRAIN_DATA, "
                        "else a per-user cache folder)")
    p.add_argument("--no-download", action="store_true",
                   help="never download; use only files already in the data root")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where to train (cuda needs CuPy and an NVIDIA GPU)")
    p.add_argument("--batch-size", "--bs", dest="batch_size", type=int, default=None,
                   help="samples per training step and process (default 64); with several "
                        "processes the global batch is this times their number")
    p.add_argument("--epochs", type=int, default=None,
                   help="total number of epochs, including those of a resumed checkpoint "
                        "(default 1; with the cosine schedule a resumed run keeps the "
                        "checkpoint's, which its rate decays over)")
    p.add_argument("--lr", type=float, default=None,
                   help="initial learning rate (default: 2e-3 for adam, 0.05 for sgd)")
    p.add_argument("--schedule", choices=SCHEDULES, default=None,
                   help="learning-rate schedule: cosine decays it to 0 over all --epochs "
                        "(default), constant keeps it")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                   help="optimizer (default adam; sgd uses --momentum)")
    p.add_argument("--momentum", type=float, default=None,
                   help="SGD momentum in [0, 1) (default 0.9; the infinitrain preset uses 0)")
    p.add_argument("--seed", type=int, default=None,
                   help="seeds initialisation, shuffling and dropout (default 0)")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="infinitrain: reproduce InfiniTrain's run (model cnn unless --model "
                        "mlp, plain SGD, lr 0.01, constant, batch 64, 1 epoch)")
    p.add_argument("--save", metavar="PATH", default=None,
                   help="write a checkpoint (.npz) at the end of every epoch, atomically")
    p.add_argument("--resume", metavar="PATH", default=None,
                   help="continue from a checkpoint written by --save (unset options are taken "
                        "from it; given ones must agree with it)")
    p.add_argument("--log-every", type=int, default=None,
                   help="steps between updates of the progress bar's loss (default 20)")
    p.add_argument("--plot", metavar="PATH", default=None,
                   help="save loss and accuracy curves; the suffix picks the format (.png, "
                        ".pdf, .svg, ...)")
    p.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="train data-parallel on N processes: re-runs this command under "
                        "mpiexec (CPU ranks split the cores; with --device cuda, one GPU each)")
    p.add_argument("--eval-batch-size", type=int, default=None, help=argparse.SUPPRESS)
    return p


def resolve_config(args: argparse.Namespace) -> argparse.Namespace:
    """Fill every unset option and validate them all; raise :class:`UsageError` on bad input.

    Unset options come from ``--resume``'s checkpoint (its settings; given ones must agree),
    then the preset, then the defaults. The loaded checkpoint is kept as ``args.checkpoint``.
    """
    for key, value in vars(args).items():
        if isinstance(value, list):  # argparse turns "--opt=--" into [], past its own checks
            raise UsageError(f"{flag(key)} needs a value")
    given = {k: flag(k) for k in VALIDATORS if getattr(args, k) is not None}
    for key, value in PRESETS.get(args.preset, {}).items():
        if key not in given:
            setattr(args, key, value)
            given[key] = f"--preset {args.preset}"
    for key in given:
        problem = VALIDATORS[key](getattr(args, key))
        if problem:
            raise UsageError(f"{flag(key)} {problem}, got {getattr(args, key)}")
    _check_paths(args)
    args.checkpoint, args.taken = None, {}
    if args.resume is not None:
        args.checkpoint = read_checkpoint(args.resume)
        args.taken = _settings_from_checkpoint(args, given, args.checkpoint)
    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    if args.lr is None:
        args.lr = DEFAULT_LR[args.optimizer]
    if args.optimizer != "sgd":
        if given.get("momentum") == "--momentum":
            raise UsageError(f"--momentum applies to --optimizer sgd only, not "
                             f"{args.optimizer}")
        args.momentum = None
    if args.device == "cuda" and not tt.cuda_is_available():
        raise UsageError("--device cuda: no usable GPU (run `python -m tinytrain.doctor`)")
    _check_nproc(args)
    return args


def _bad_path(opt: str, raw: str, exc: Exception) -> UsageError:
    """A path the OS refuses outright (a NUL byte, a name too long, ...)."""
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return UsageError(f"{opt} {raw[:60]}{'...' if len(raw) > 60 else ''}: {why}")


def _check_paths(args: argparse.Namespace) -> None:
    """--data-dir and --resume must exist and be readable (outputs: :func:`prepare_outputs`)."""
    if args.data_dir is not None:
        if not args.data_dir:
            raise UsageError("--data-dir needs a folder name")
        try:
            d = Path(args.data_dir).expanduser()
            is_dir, readable = d.is_dir(), os.access(d, os.R_OK | os.X_OK)
        except (ValueError, OSError) as exc:
            raise _bad_path("--data-dir", args.data_dir, exc) from None
        if not is_dir:
            raise UsageError(f"--data-dir {d} is not a readable directory")
        if not readable:
            raise UsageError(f"--data-dir {d} is not readable (permission denied)")
    if args.resume is not None:
        if not args.resume:  # Path("") is the current folder
            raise UsageError("--resume needs a file name: no such checkpoint file ''")
        try:
            r = Path(args.resume).expanduser()
            is_file, is_dir, readable = r.is_file(), r.is_dir(), os.access(r, os.R_OK)
        except (ValueError, OSError) as exc:
            raise _bad_path("--resume", args.resume, exc) from None
        if not is_file:
            raise UsageError(f"--resume {args.resume}: no such checkpoint file"
                             + (" (it is a folder)" if is_dir else ""))
        if not readable:
            raise UsageError(f"--resume {args.resume} is not readable (permission denied)")


def _settings_from_checkpoint(args: argparse.Namespace, given: dict[str, str],
                              ck: dict[str, Any]) -> dict[str, Any]:
    """Take the checkpoint's settings for the options not given; refuse given ones that differ.

    Returns the settings taken, by key."""
    saved, done = ck["settings"], ck["epoch"]
    taken = {}
    for key in SETTINGS:
        value = getattr(args, key)
        if key not in given:
            if saved[key] is not None:
                setattr(args, key, saved[key])
                taken[key] = saved[key]
            continue
        if value == saved[key]:
            continue
        if key == "epochs" and saved["schedule"] == "constant":  # a constant run may go longer
            if value < done:
                raise UsageError(f"--epochs {value} is fewer than the {done} epochs the "
                                 f"checkpoint {args.resume} has already trained")
            continue
        how = given[key]
        what = f"{flag(key)} {value}" + (f" (from {how})" if how.startswith("--preset") else "")
        fix = ("its cosine schedule decays to 0 over exactly its epochs, so only a new run "
               "can train longer" if key == "epochs" else "resume without it, or start a new run")
        saved_value = "none" if saved[key] is None else saved[key]
        raise UsageError(f"{what} differs from the checkpoint's {saved_value}: {fix}")
    return taken


# --------------------------------------------------------------------------- outputs


def _is_tinytrain_file(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return "__structure__.npy" in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def _is_checkpoint(path: Path) -> bool:
    """True for a file this command wrote (any format version): not just any tt.save file,
    such as a model's exported weights, which --save must not replace."""
    try:
        saved = tt.load(path)
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and isinstance(saved.get("format"), int) and "model" in saved


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_plot_format(raw: str, plot: Path) -> None:
    """``plot``'s suffix is a format matplotlib knows, and a tiny figure can be written in it
    here (``.pgf`` needs LaTeX, ``.avif`` a Pillow built with it): found out now, not after
    the training."""
    from matplotlib.figure import Figure

    formats = sorted(Figure().canvas.get_supported_filetypes())
    fmt = plot.suffix.lower().lstrip(".")
    if fmt not in formats:
        raise UsageError(f"--plot {raw}: unknown image format '{plot.suffix or '(no suffix)'}'; "
                         "use one of " + ", ".join(f".{f}" for f in formats))
    fig = Figure(figsize=(1, 1))
    fig.subplots().plot([0, 1])
    try:
        fig.savefig(io.BytesIO(), format=fmt)
    except Exception as exc:  # whatever the backend raises: the message says it
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--plot {raw}: matplotlib cannot write .{fmt} here ({reason})") from None


def _check_output(opt: str, raw: str) -> Path:
    """``raw`` names a file we can write: its folder exists (created now if needed) and is
    writable (the temporary file of the atomic write is created and removed there to be
    sure), and it is not a folder."""
    if not raw:
        raise UsageError(f"{opt} needs a file name")
    try:
        path = Path(raw).expanduser()
        is_dir, exists, is_file = path.is_dir(), path.exists(), path.is_file()
        existing = path.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
    except (ValueError, OSError) as exc:
        raise _bad_path(opt, raw, exc) from None
    if raw.endswith(("/", os.sep)) or is_dir:
        raise UsageError(f"{opt} {raw} is a folder; give a file name in it")
    if exists and not is_file:
        raise UsageError(f"{opt} {raw} exists and is not a regular file")
    if not existing.is_dir():
        raise UsageError(f"{opt} {raw}: {existing} is a file, not a folder")
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target = replaceable_target(path)  # a symbolic link is written through
        folder = target.parent
        probe = temp_path_for(target)  # the very name the atomic write will use
        try:
            open(probe, "xb").close()
        finally:
            probe.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"{opt} {raw}: cannot write in {folder} "
                         f"({exc.strerror or exc})") from None
    return path


def prepare_outputs(args: argparse.Namespace) -> None:
    """Check ``--save`` and ``--plot`` before any training, so no epoch is lost to a bad path.

    The rules are those of the module docstring. Creates their folders; raises UsageError."""
    save = _check_output("--save", args.save) if args.save is not None else None
    plot = _check_output("--plot", args.plot) if args.plot is not None else None
    resume = Path(args.resume).expanduser() if args.resume else None
    if save is not None and save.exists() and not (resume and _same_file(save, resume)):
        if not _is_checkpoint(save):
            raise UsageError(f"--save {args.save} exists and is not a checkpoint of this "
                             f"command; choose another name (it would be overwritten)")
    if plot is not None:
        if save is not None and _same_file(plot, save):
            raise UsageError(f"--plot and --save are the same file {args.plot}")
        if resume is not None and _same_file(plot, resume):
            raise UsageError(f"--plot {args.plot} is the --resume checkpoint; the curves "
                             f"would replace it")
        if plot.exists() and _is_tinytrain_file(plot):
            raise UsageError(f"--plot {args.plot} is a tinytrain checkpoint; the curves "
                             f"would replace it")
        _check_plot_format(args.plot, plot)
    # the epoch of the checkpoint of this run in --save (continuing in place: the resumed one)
    args.saved_epoch = (args.checkpoint["epoch"] if save is not None and resume is not None
                        and _same_file(save, resume) else None)


# --------------------------------------------------------------------------- data


def open_datasets(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """The train and test sets. Only when neither --dataset nor --data-dir was given, and full
    MNIST is *absent* (no file of it on disk, no download), fall back to mnist-mini with a
    warning: data that is there but broken is an error that says what is wrong."""
    name = args.dataset or "mnist"
    try:
        train = load_dataset(name, args.data_dir, train=True, download=not args.no_download)
        test = load_dataset(name, args.data_dir, train=False, download=not args.no_download)
        return train, test, name
    except (OSError, ValueError, RuntimeError) as exc:
        absent = isinstance(exc, MissingDataError | DownloadError) and not exc.found
        if args.dataset is not None or args.data_dir is not None or not absent:
            which = f"--dataset {name}" if args.dataset is not None else "MNIST"
            raise UsageError(f"{which}: {_data_problem(exc, args)}") from None
        print(f"warning: full MNIST is not available ({_data_problem(exc, args)}); training "
              "on the bundled mnist-mini instead. Set TINYTRAIN_DATA or --data-dir to a folder "
              "holding mnist/.", file=sys.stderr)
        return (load_dataset("mnist-mini", train=True), load_dataset("mnist-mini", train=False),
                "mnist-mini")


def _data_problem(exc: Exception, args: argparse.Namespace) -> str:
    """A data-set error in one line, in terms of this command's flags."""
    mini = ", or use --dataset mnist-mini"
    if isinstance(exc, DataFileError) and args.dataset != "mnist-mini":
        where = f"{exc.data_dir}{os.sep}"
        if isinstance(exc, CorruptDataError):
            return (f"{exc.path} is corrupt or incomplete (its checksum is not the official "
                    f"{exc.file}'s); delete it, or run without --no-download to fetch it again")
        if isinstance(exc, MissingDataError):
            return (f"{exc.file} is not in {where} and --no-download was given; put the data "
                    f"set's four files there (`python -m tinytrain.doctor` checks them), run "
                    f"without --no-download to download them{mini}")
        if isinstance(exc, DownloadError):
            why = exc.errors[0][1] if exc.errors else "no mirror to download from"
            there = [p for p in exc.found if p.name.startswith(exc.file.removesuffix(".gz"))]
            if there:  # on disk but damaged: the download was to replace it
                return (f"{there[0]} is corrupt or incomplete (its checksum is not the official "
                        f"{exc.file}'s) and a fresh copy could not be downloaded ({why}); "
                        f"replace it{mini}")
            return (f"{exc.file} is not in {where} and could not be downloaded ({why}); put the "
                    f"data set's four files there{mini}")
    if isinstance(exc, OSError) and exc.filename:
        return f"cannot read {exc.filename}: {exc.strerror or exc}"
    return str(exc).strip().splitlines()[0]


# --------------------------------------------------------------------------- model


def make_optimizer(args: argparse.Namespace, model: tt.nn.Module) -> optim.Optimizer:
    if args.optimizer == "adam":
        return optim.Adam(model.parameters(), lr=args.lr)
    return optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)


@dataclass
class EvalResult:
    total: int
    correct: int
    loss_sum: float

    @property
    def accuracy(self) -> float:
        return self.correct / max(self.total, 1)

    @property
    def avg_loss(self) -> float:
        return self.loss_sum / max(self.total, 1)


@tt.no_grad()
def evaluate(model: tt.nn.Module, loader: DataLoader, device: str = "cpu") -> EvalResult:
    """Loss and accuracy over a whole loader, under ``no_grad`` and in eval mode."""
    was_training = model.training
    model.eval()
    total = correct = 0
    loss_sum = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        correct += int((logits.argmax(1) == y).sum().item())
        total += y.shape[0]
    model.train(was_training)
    return EvalResult(total, correct, loss_sum)


@dataclass
class History:
    step_loss: list[float] = field(default_factory=list)  # mean loss of each logged window
    step_index: list[int] = field(default_factory=list)
    epoch_acc: list[float] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)


def train_one_epoch(model: tt.nn.Module, opt: optim.Optimizer, sched: Any, loader: DataLoader,
                    device: str, bar: Any, log_every: int, history: History,
                    step0: int) -> tuple[float, int]:
    """One pass over ``loader``; returns (mean training loss, samples seen).

    Raises RunError as soon as a logged window's mean loss is not finite (NaN or inf in any
    of its steps), so a diverged model is never trained on, evaluated or saved."""
    model.train()
    running = 0.0
    window = seen = 0
    total_loss = 0.0
    t0 = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        running = running + loss._data  # stays on the device: no sync per step
        window += 1
        seen += y.shape[0]
        if window == log_every or i == len(loader) - 1:
            mean = float(running) / window
            if not math.isfinite(mean):
                raise RunError(f"the training loss became {mean} by step {step0 + i + 1}: the "
                               f"run diverged (try a smaller --lr)")
            total_loss += mean * window
            history.step_loss.append(mean)
            history.step_index.append(step0 + i + 1)
            bar.set_postfix(loss=f"{mean:.4f}",
                            samples_s=f"{seen / (time.perf_counter() - t0):.0f}")
            running, window = 0.0, 0
        bar.update(1)
    return total_loss / max(len(loader), 1), seen


def _not_finite(named: dict[str, Any]) -> str | None:
    """The first name whose array (or Tensor, or number) holds NaN or inf."""
    for name, v in named.items():
        data = v._data if isinstance(v, tt.Tensor) else v
        if hasattr(data, "dtype") and data.dtype.kind == "f":
            xp = get_array_module(data)
            if not bool(xp.isfinite(data).all()):
                return name
        elif isinstance(data, float) and not math.isfinite(data):
            return name
    return None


def _optimizer_arrays(opt: optim.Optimizer) -> dict[str, Any]:
    sd = opt.state_dict()
    return {f"optimizer state {k} of parameter {i}": v
            for i, s in sd["state"].items() for k, v in s.items()}


def save_plot(history: History, path: str) -> None:
    """Loss per logged window and test accuracy per epoch, written atomically; the format is
    ``path``'s suffix."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.5))
    a, b = fig.subplots(1, 2)
    a.plot(history.step_index, history.step_loss)
    a.set(xlabel="step", ylabel="training loss", yscale="log", title="loss")
    epochs = range(1, len(history.epoch_acc) + 1)
    b.plot(epochs, [100 * v for v in history.epoch_acc], "o-")
    b.set(xlabel="epoch", ylabel="test accuracy (%)", title="accuracy", xticks=list(epochs))
    b.set_ylim(top=100)
    fig.tight_layout()
    target = Path(path).expanduser()
    with atomic_file(target, make_folder=True) as f:
        fig.savefig(f, dpi=100, format=target.suffix.lower().lstrip("."))


# --------------------------------------------------------------------------- several processes


@dataclass(frozen=True)
class Ranks:
    """This process's place in a data-parallel run: rank 0 of 1 when it runs alone."""

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """Rank 0 checks the outputs, prints, plots and writes files; the others stay quiet."""
        return self.rank == 0


ALONE = Ranks()


def _quiet(*args: Any, **kwargs: Any) -> None:
    pass


def _check_nproc(args: argparse.Namespace) -> None:
    if args.nproc is not None and args.nproc <= 0:
        raise UsageError(f"--nproc must be a positive integer, got {args.nproc}")
    started = launch.launched_world_size()
    if args.nproc is not None and started > 1 and args.nproc != started:
        raise UsageError(f"--nproc {args.nproc}, but mpiexec started {started} processes")
    world = os.environ.get("WORLD_SIZE", "")
    if args.nproc is None and started == 1 and world.isdigit() and int(world) > 1:
        raise UsageError(f"WORLD_SIZE={world} in the environment (torchrun sets it) says this "
                         f"process is one of {world}, but no mpiexec started it: each process "
                         f"would train alone; start the ranks with --nproc {world} instead")


def start_ranks(args: argparse.Namespace) -> Ranks:
    """Join the other processes when mpiexec started several (MPI between CPU ranks, NCCL
    between GPUs); a process started alone is rank 0 of 1 and does not touch MPI."""
    if launch.launched_world_size() == 1:
        return ALONE
    from tinytrain import distributed as dist

    group = dist.init_process_group("nccl" if args.device == "cuda" else "mpi")
    return Ranks(group.rank, group.world_size)


def stop_ranks(ranks: Ranks) -> None:
    if ranks.size > 1:
        from tinytrain import distributed as dist

        dist.destroy_process_group()


def wrap_model(net: tt.nn.Module, ranks: Ranks) -> tt.nn.Module:
    """DistributedDataParallel around the model on several ranks (rank 0's weights win)."""
    if ranks.size == 1:
        return net
    from tinytrain.distributed import DistributedDataParallel

    return DistributedDataParallel(net)


def reseed_for_rank(seed: int, ranks: Ranks) -> None:
    """Rank 0 keeps the generator of a one-process run; every other rank draws its own
    dropout masks (the same masks on every rank would correlate their noise)."""
    if ranks.rank:
        tt.manual_seed(int(np.random.SeedSequence([seed, ranks.rank]).generate_state(1)[0]))


def make_train_loader(train_set: Any, args: argparse.Namespace, ranks: Ranks) -> DataLoader:
    """One process: the whole set, reshuffled every epoch. Several: this rank's shard of the
    same shuffled order (DistributedSampler; ``set_epoch`` reshuffles), so R ranks of batch B
    together see what one process of batch R*B sees."""
    # on a GPU the data set stays there: one copy per run, not one per batch
    if ranks.size == 1:
        return DataLoader(train_set, batch_size=args.batch_size, shuffle=True, seed=args.seed,
                          device=args.device)
    sampler = DistributedSampler(train_set, ranks.size, ranks.rank, shuffle=True,
                                 seed=args.seed)
    return DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                      device=args.device)


def steps_per_epoch(settings: dict[str, Any], world_size: int) -> int:
    """Optimizer steps per epoch on each of ``world_size`` ranks (a DistributedSampler shard
    has ``ceil(n / R)`` samples)."""
    shard = math.ceil(settings["train_size"] / world_size)
    return math.ceil(shard / settings["batch_size"])


def evaluate_sharded(model: tt.nn.Module, dataset: Any, batch_size: int,
                     device: str = "cpu") -> EvalResult:
    """Each rank evaluates its disjoint shard; one SUM all-reduce of (count, correct, loss
    sum) gives every rank the counts of the whole set, exactly."""
    from tinytrain.distributed.utils import shard_dataset, sum_over_ranks

    mine = evaluate(model, DataLoader(shard_dataset(dataset), batch_size=batch_size,
                                      device=device), device)
    total, correct, loss_sum = sum_over_ranks(mine.total, mine.correct, mine.loss_sum)
    return EvalResult(int(total), int(correct), loss_sum)


def evaluate_on_ranks(net: tt.nn.Module, test_set: Any, args: argparse.Namespace,
                      ranks: Ranks) -> EvalResult:
    if ranks.size == 1:
        return evaluate(net, DataLoader(test_set, batch_size=args.eval_batch_size,
                                        device=args.device), args.device)
    return evaluate_sharded(net, test_set, args.eval_batch_size, args.device)


def mean_over_ranks(value: float, ranks: Ranks) -> float:
    """The mean of every rank's ``value`` (once per epoch: logging per step stays local)."""
    if ranks.size == 1:
        return value
    from tinytrain.distributed.utils import sum_over_ranks

    return sum_over_ranks(value)[0] / ranks.size


def rng_states(ranks: Ranks) -> list[Any]:
    """Every rank's generator state, in rank order (a collective: call it on every rank)."""
    if ranks.size == 1:
        return [tt.get_rng_state()]
    from tinytrain import distributed as dist

    return dist.group().allgather_object(tt.get_rng_state())


def restore_rng(ck: dict[str, Any], args: argparse.Namespace, ranks: Ranks) -> None:
    """Each rank takes its own saved generator when the checkpoint has as many ranks; on
    another number of ranks, rank 0 takes rank 0's and the others start fresh streams."""
    per_rank = ck.get("rng_per_rank")
    if isinstance(per_rank, list) and len(per_rank) == ranks.size:
        tt.set_rng_state(per_rank[ranks.rank])
    elif ranks.main:
        tt.set_rng_state(ck["rng"])
    else:
        reseed_for_rank(args.seed + int(ck["epoch"]), ranks)


def _check_ranks_fields(ck: dict[str, Any], bad: Callable[[str], UsageError]) -> None:
    """The fields a multi-rank run adds (absent from older checkpoints: one rank)."""
    world = ck.get("world_size", 1)
    if problem := _positive_int(world):
        raise bad(f"its world_size {problem}, got {world!r}")
    if problem := _non_negative_int(ck.get("optimizer_steps", 0)):
        raise bad(f"its optimizer_steps {problem}, got {ck['optimizer_steps']!r}")
    per_rank = ck.get("rng_per_rank", [ck["rng"]])
    if not isinstance(per_rank, list) or len(per_rank) != world:
        raise bad(f"its rng_per_rank is not a list of {world} RNG states")
    for state in per_rank:
        _check_rng(state, bad)


def _exit_code(code: int) -> int:
    """A rank that ends with an error makes every rank stop (MPI_Abort at exit), instead of
    leaving the others waiting in a collective for it."""
    from tinytrain import distributed as dist

    if dist.is_initialized():
        launch.abort_at_exit(code)
    return code


# --------------------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> EvalResult:
    """Train as configured by ``args`` (from :func:`resolve_config`); return the test result."""
    try:
        return _run(args)
    finally:
        gc.unfreeze()  # _run froze what existed before training (see there)


def _run(args: argparse.Namespace) -> EvalResult:
    from tqdm.auto import tqdm

    if args.device == "cuda":  # NVRTC compiles the kernels while the data set loads
        from tinytrain.kernels.cuda import runtime

        runtime.compile_in_background(np.float32)
    ranks = start_ranks(args)
    say = print if ranks.main else _quiet
    if ranks.main:
        prepare_outputs(args)
    tt.manual_seed(args.seed)
    train_set, test_set, dataset_name = open_datasets(args)
    net = build_model(args.model).to(args.device)
    model = wrap_model(net, ranks)
    reseed_for_rank(args.seed, ranks)
    loader = make_train_loader(train_set, args, ranks)
    opt = make_optimizer(args, model)
    sched = (optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
             if args.schedule == "cosine" else None)
    history = History()
    settings = {key: getattr(args, key) for key in SETTINGS} | {"dataset": dataset_name,
                                                               "train_size": len(train_set)}
    start_epoch = steps = 0
    if args.checkpoint is not None:
        start_epoch, steps = resume(args, args.checkpoint, settings, net, opt, sched, history,
                                    ranks, len(loader))
    n_params = sum(p.numel() for p in net.parameters())
    batch = (f"batch {args.batch_size}" if ranks.size == 1 else
             f"batch {args.batch_size} x {ranks.size} ranks = {args.batch_size * ranks.size}")
    say(f"model {args.model} ({n_params:,} parameters) | {dataset_name}: {len(train_set):,} "
        f"train, {len(test_set):,} test | {args.optimizer} lr {args.lr:g}"
        + (f" momentum {args.momentum:g}" if args.optimizer == "sgd" else "")
        + f" ({args.schedule}) | {batch} | {args.device}")
    # Python's cyclic garbage collector walks every object it tracks on a full collection:
    # hundreds of thousands once CuPy (or PyTorch) is imported. The objects alive now (the
    # libraries, the model, the data set) stay alive, so freeze them: the collections that the
    # steps' short-lived objects trigger then walk only those. On the H200's host, the
    # collections of a process with PyTorch loaded cost a convnet step (batch 64) from 0.35
    # to 1.4 ms (bench/NOTES_gpu.md).
    gc.collect()
    gc.freeze()
    result = None
    for epoch in range(start_epoch, args.epochs):
        loader.set_epoch(epoch)
        t0 = time.perf_counter()
        with tqdm(total=len(loader), desc=f"epoch {epoch + 1}/{args.epochs}", unit="step",
                  leave=False, file=sys.stderr, mininterval=0.5, disable=not ranks.main) as bar:
            train_loss, seen = train_one_epoch(model, opt, sched, loader, args.device, bar,
                                               args.log_every, history, epoch * len(loader))
        seconds = time.perf_counter() - t0
        steps += len(loader)
        bad = _not_finite(net.state_dict()) or _not_finite(_optimizer_arrays(opt))
        if bad:
            raise RunError(f"{bad} is not finite after epoch {epoch + 1}: the run diverged "
                           f"(try a smaller --lr)")
        result = evaluate_on_ranks(net, test_set, args, ranks)
        train_loss = mean_over_ranks(train_loss, ranks)
        history.epoch_acc.append(result.accuracy)
        history.epoch_loss.append(train_loss)
        say(f"epoch {epoch + 1}/{args.epochs} | train loss {train_loss:.4f} | test acc "
            f"{100 * result.accuracy:.2f}% | {seconds:.1f} s | "
            f"{seen * ranks.size / seconds:.0f} samples/s", flush=True)
        if args.save:
            # (a signal may land after the file is replaced, before saved_epoch says so:
            # the message then tells by the file, which the rename makes a new one)
            args.saving = (epoch + 1, _file_id(args.save))
            save_checkpoint(args.save, settings, net, opt, sched, epoch + 1, history, ranks,
                            steps)
            args.saved_epoch, args.saving = epoch + 1, None
    if result is None:  # the checkpoint already had every epoch: just evaluate
        result = evaluate_on_ranks(net, test_set, args, ranks)
    if ranks.size > 1:
        model.check_consistency()
        say(f"parameters bit-identical on all {ranks.size} ranks")
    say(f"test: {result.correct}/{result.total} correct | accuracy "
        f"{100 * result.accuracy:.2f}% | avg loss {result.avg_loss:.4f}")
    if args.plot and ranks.main:
        try:
            save_plot(history, args.plot)
        except OSError as exc:
            raise RunError(f"could not write the curves to {args.plot}: "
                           f"{exc.strerror or exc}") from None
        print(f"curves written to {args.plot}")
    stop_ranks(ranks)
    return result


def save_checkpoint(path: str, settings: dict[str, Any], model: tt.nn.Module,
                    opt: optim.Optimizer, sched: Any, epoch: int, history: History,
                    ranks: Ranks = ALONE, steps: int | None = None) -> None:
    """Write the checkpoint atomically; a failed write is a RunError (the old file stays).

    Every rank calls it (their RNG states are gathered); rank 0 writes. ``steps`` counts the
    optimizer steps so far (default: ``epoch`` full epochs of this run)."""
    states = rng_states(ranks)
    if not ranks.main:
        return
    try:
        tt.save({
            "format": CHECKPOINT_FORMAT,
            "settings": settings,
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "schedule": None if sched is None else sched.state_dict(),
            "rng": states[0],
            "history": vars(history),
            "world_size": ranks.size,
            "rng_per_rank": states,
            "optimizer_steps": epoch * steps_per_epoch(settings, ranks.size)
            if steps is None else steps,
        }, Path(path).expanduser())
    except OSError as exc:
        raise RunError(f"could not write the checkpoint {path}: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------- resume


def read_checkpoint(path: str) -> dict[str, Any]:
    """Load ``path`` and check the fields that do not depend on the model: format, settings,
    epoch, schedule, RNG state and history. Raises UsageError naming what is wrong."""
    def bad(problem: str) -> UsageError:
        return UsageError(f"--resume {path}: {problem}")

    try:
        ck = tt.load(Path(path).expanduser())
    except (ValueError, OSError) as exc:
        raise bad(str(exc).removeprefix("load: ")) from None
    if not isinstance(ck, dict) or "format" not in ck:
        raise bad("not a tinytrain.train checkpoint (no 'format' field)")
    if ck["format"] != CHECKPOINT_FORMAT:
        if ck["format"] == 1:
            raise bad("written by an older tinytrain (checkpoint format 1), which did not "
                      "record the run's settings; it cannot be resumed safely")
        raise bad(f"unknown checkpoint format {ck['format']!r} (this tinytrain reads "
                  f"{CHECKPOINT_FORMAT})")
    kinds = {"settings": dict, "epoch": int, "model": dict, "optimizer": dict,
             "schedule": (dict, type(None)), "rng": dict, "history": dict}
    for key, kind in kinds.items():
        if key not in ck:
            raise bad(f"the '{key}' field is missing")
        if not isinstance(ck[key], kind) or isinstance(ck[key], bool):
            raise bad(f"the '{key}' field has the wrong type ({type(ck[key]).__name__})")
    s = ck["settings"]
    for key in (*SETTINGS, "train_size"):
        if key not in s:
            raise bad(f"the setting '{key}' is missing")
        check = VALIDATORS.get(key, _positive_int)
        if not (key == "momentum" and s["optimizer"] != "sgd" and s[key] is None):
            if problem := check(s[key]):
                raise bad(f"its setting {key} {problem}, got {s[key]!r}")
    if not 0 <= ck["epoch"] <= s["epochs"]:
        raise bad(f"its epoch {ck['epoch']} is outside 0..{s['epochs']}")
    _check_rng(ck["rng"], bad)
    _check_history(ck["history"], ck["epoch"], bad)
    _check_ranks_fields(ck, bad)
    if (ck["schedule"] is None) != (s["schedule"] == "constant"):
        raise bad(f"its schedule state does not match its {s['schedule']} schedule")
    return ck


def _check_rng(state: Any, bad: Callable[[str], UsageError]) -> None:
    try:
        np.random.default_rng().bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise bad(f"its RNG state is invalid ({exc})") from None


def _check_history(history: dict, epoch: int, bad: Callable[[str], UsageError]) -> None:
    lengths = {}
    for key in History.__dataclass_fields__:
        values = history.get(key)
        if not isinstance(values, list) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise bad(f"its history field '{key}' is not a list of numbers")
        lengths[key] = len(values)
    if lengths["step_loss"] != lengths["step_index"] or lengths["epoch_acc"] != epoch \
            or lengths["epoch_loss"] != epoch:
        raise bad("its history does not match its epoch count")


def resume(args: argparse.Namespace, ck: dict[str, Any], settings: dict[str, Any],
           model: tt.nn.Module, opt: optim.Optimizer, sched: Any, history: History,
           ranks: Ranks = ALONE, steps_now: int | None = None) -> tuple[int, int]:
    """Check the checkpoint against this run, then restore model, optimizer, schedule, RNG and
    history. Returns the number of epochs and of optimizer steps already done.

    The checks use the steps per epoch of the run that saved it (its number of ranks);
    ``steps_now`` is this run's, to place a cosine schedule at the same epoch."""
    path = args.resume

    def bad(problem: str) -> UsageError:
        return UsageError(f"--resume {path}: {problem}")

    if ck["settings"]["train_size"] != settings["train_size"]:
        raise bad(f"its run trained on {ck['settings']['train_size']:,} samples of "
                  f"{settings['dataset']}, this one has {settings['train_size']:,} (other files?)")
    _check_weights(ck["model"], model, settings["model"], bad)
    saved_ranks = ck.get("world_size", 1)
    steps = steps_per_epoch(settings, saved_ranks)
    done = ck.get("optimizer_steps", ck["epoch"] * steps)
    _check_optimizer_state(ck["optimizer"], opt, ck["settings"], ck["epoch"] * steps, bad,
                           steps, done)
    if sched is not None:
        expected = {"T_max": settings["epochs"] * steps, "eta_min": 0.0,
                    "base_lrs": [settings["lr"]], "last_epoch": ck["epoch"] * steps}
        if any(ck["schedule"].get(k) != v for k, v in expected.items()):
            raise bad(f"its cosine schedule state {ck['schedule']} is not the one of its "
                      f"settings after epoch {ck['epoch']} ({expected})")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    if sched is not None:
        state = ck["schedule"]
        if saved_ranks != ranks.size and steps_now is not None:  # other steps per epoch
            state = state | {"T_max": args.epochs * steps_now,
                             "last_epoch": ck["epoch"] * steps_now}
        sched.load_state_dict(state)
    if ck["epoch"] < args.epochs and not all(g["lr"] > 0 for g in opt.param_groups):
        raise bad(f"its learning rate is {opt.param_groups[0]['lr']}: the remaining epochs "
                  f"would not train")
    restore_rng(ck, args, ranks)
    for key in History.__dataclass_fields__:
        setattr(history, key, list(ck["history"][key]))
    if args.taken and ranks.main:
        print("settings from the checkpoint: " + " ".join(
            f"{flag(k)} {v}" for k, v in args.taken.items()))
    status = "all epochs done, evaluating only" if ck["epoch"] >= args.epochs else \
        f"continuing to epoch {args.epochs}"
    if saved_ranks != ranks.size:
        status += f"; saved by {saved_ranks} rank(s), continued on {ranks.size}"
    if ranks.main:
        print(f"resumed from {path} after epoch {ck['epoch']} ({status})")
    return ck["epoch"], done


def _check_weights(weights: dict, model: tt.nn.Module, model_name: str,
                   bad: Callable[[str], UsageError]) -> None:
    own = model.state_dict()
    if set(weights) != set(own):
        missing = sorted(set(own) - set(weights))
        extra = sorted(set(weights) - set(own))
        raise bad(f"its weights do not fit the {model_name} model (missing "
                  f"{missing[:3] or 'none'}, unexpected {extra[:3] or 'none'}): a checkpoint "
                  "of another model?")
    for name, target in own.items():
        w = weights[name]
        if not isinstance(w, tt.Tensor) or w.shape != target.shape or w.dtype != target.dtype:
            found = (f"{w.dtype} {w.shape}" if isinstance(w, tt.Tensor)
                     else type(w).__name__)
            raise bad(f"its {name} is {found}, the model's is {target.dtype} {target.shape}")
    if name := _not_finite(weights):
        raise bad(f"its weights are not finite ({name} has NaN or inf): it was saved from a "
                  f"diverged run")


def _check_optimizer_state(sd: dict, opt: optim.Optimizer, settings: dict, steps_done: int,
                           bad: Callable[[str], UsageError], steps_per_epoch: int | None = None,
                           optimizer_steps: int | None = None) -> None:
    """The saved optimizer state is what ``opt`` (built from the same settings) would hold
    after ``steps_done`` steps: the same hyper-parameters (the learning rate as the schedule
    has it), one state entry per parameter with the optimizer's buffers, of the parameters'
    shapes, finite, and Adam's step counts equal to ``steps_done``. A run continued on another
    number of ranks has other steps per epoch: ``steps_per_epoch`` (of the run that saved it)
    places the schedule, and ``optimizer_steps`` is the count of steps actually taken."""
    optimizer_steps = steps_done if optimizer_steps is None else optimizer_steps
    params = [p for g in opt.param_groups for p in g["params"]]
    groups, state = sd.get("param_groups"), sd.get("state")
    if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
        raise bad("its optimizer state has no valid 'param_groups' (one group expected)")
    if not isinstance(state, dict):
        raise bad("its optimizer state has no valid 'state'")
    group, fresh = groups[0], opt.param_groups[0]
    if group.get("params") != list(range(len(params))):
        raise bad(f"its optimizer state is for other parameters than the {len(params)} of "
                  f"the model")
    # A checkpoint of an earlier tinytrain lacks the options added since (amsgrad, foreach,
    # ...): absent, they are at their defaults, as load_state_dict leaves them.
    added = {k for k in set(fresh) - set(group) if fresh[k] == opt.defaults.get(k, ...)}
    if set(group) != set(fresh) - added:
        raise bad(f"its optimizer settings {sorted(group)} are not {settings['optimizer']}'s "
                  f"{sorted(set(fresh) - added)}")
    for key, value in fresh.items():
        if key not in ("params", "lr", *added) and group[key] != value:
            raise bad(f"its optimizer's {key} is {group[key]!r}, its settings give {value!r}")
    lr, expected_lr = group["lr"], settings["lr"]
    if settings["schedule"] == "cosine":
        total = settings["epochs"] * (steps_per_epoch or math.ceil(settings["train_size"]
                                                                  / settings["batch_size"]))
        expected_lr *= (1 + math.cos(math.pi * min(steps_done, total) / total)) / 2
    if not (isinstance(lr, int | float) and math.isclose(lr, expected_lr, rel_tol=1e-9,
                                                         abs_tol=1e-15)):
        raise bad(f"its optimizer's learning rate {lr!r} is not {expected_lr:g}, what its "
                  f"settings give after {steps_done} steps")
    names = OPTIMIZER_STATE[settings["optimizer"]]
    has_state = optimizer_steps > 0 and (settings["optimizer"] == "adam"
                                         or settings["momentum"])
    if set(state) != (set(range(len(params))) if has_state else set()):
        raise bad(f"its optimizer state covers parameters {sorted(state, key=str)[:5]}..., "
                  f"expected {'all ' + str(len(params)) if has_state else 'none'}")
    for i, entry in state.items():
        if not isinstance(entry, dict) or set(entry) != names:
            found = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise bad(f"its optimizer state for parameter {i} has {found}, expected "
                      f"{sorted(names)} for {settings['optimizer']}")
        for k, v in entry.items():
            if k == "step":
                if v != optimizer_steps or not isinstance(v, int) or isinstance(v, bool):
                    raise bad(f"its optimizer step count {v!r} for parameter {i} is not the "
                              f"{optimizer_steps} steps of its {settings['optimizer']} run")
            elif (not isinstance(v, np.ndarray | tt.Tensor) or v.dtype.kind != "f"
                  or tuple(v.shape) != params[i].shape):
                found = f"{v.dtype} {tuple(v.shape)}" if hasattr(v, "shape") else \
                    type(v).__name__
                raise bad(f"its optimizer state {k} for parameter {i} is {found}, the "
                          f"parameter is {params[i].dtype} {params[i].shape}")
    if name := _not_finite({f"{k} of parameter {i}": v for i, e in state.items()
                            for k, v in e.items()}):
        raise bad(f"its optimizer state is not finite ({name}): it was saved from a diverged run")


# --------------------------------------------------------------------------- main


def _file_id(path: str) -> tuple[int, int, int] | None:
    """Which file is at ``path`` now (None if none): an atomic save replaces it."""
    try:
        st = os.stat(Path(path).expanduser())
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _interrupted(args: argparse.Namespace | None) -> str:
    save, epoch = getattr(args, "save", None), getattr(args, "saved_epoch", None)
    saving = getattr(args, "saving", None)
    if save and saving is not None and _file_id(save) != saving[1]:
        epoch = saving[0]  # the save was interrupted after its rename: the file has it
    if not save:
        return "nothing was saved (no --save)"
    if epoch is None:
        return f"no checkpoint of this run was written to {save} yet"
    return f"the last checkpoint, after epoch {epoch}, is intact in {save}"


class _StreamUntilClosed:
    """``sys.stdout`` or ``sys.stderr`` during a run: once its reader has gone
    (``... | head -3``, ``2>&1 | head``), what is written is dropped and training goes on to
    save its checkpoints. A BrokenPipeError from a progress line (the progress bar writes to
    stderr) must not end a run and lose the epoch it had just finished. A stream that was
    closed before the start (``>&-``: Python then has None there) writes to /dev/null."""

    def __init__(self, stream: Any) -> None:
        self._devnull = open(os.devnull, "w") if stream is None else None  # noqa: SIM115
        self._stream = stream if stream is not None else self._devnull

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def close_devnull(self) -> None:
        """Close the /dev/null file this wrapper opened, if any."""
        if self._devnull is not None:
            self._devnull.close()

    def _to_devnull(self) -> None:
        """Point the stream's file at /dev/null, so that what is still buffered (and
        Python's flush at exit) writes there instead of raising again."""
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            return
        try:
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """The command: returns the exit status (0 ok, 1 run failed, 2 usage, 130 Ctrl-C, 143
    SIGTERM)."""
    prog = "python -m tinytrain.train"

    def on_sigterm(signum: int, frame: Any) -> None:
        raise Terminated

    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if in_main_thread else None
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _StreamUntilClosed(sys.stdout), _StreamUntilClosed(sys.stderr)
    try:
        with warnings.catch_warnings():
            # A run that diverges is reported in one line (the loss or a state is not
            # finite); NumPy's overflow warnings on the way there would only bury it.
            warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero) "
                                    "encountered", RuntimeWarning)
            return _main(argv, prog, in_main_thread)
    finally:
        for wrapper in (sys.stdout, sys.stderr):
            if isinstance(wrapper, _StreamUntilClosed):
                wrapper.flush()
                wrapper.close_devnull()
        sys.stdout, sys.stderr = streams
        if in_main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _main(argv: list[str] | None, prog: str, in_main_thread: bool) -> int:
    """The command itself, inside :func:`main`'s SIGTERM handler and stream guards."""
    args = None
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser().parse_args(argv)
        resolve_config(args)
        if args.nproc and args.nproc > 1 and launch.launched_world_size() == 1:
            return launch.relaunch(args.nproc, ["-m", "tinytrain.train", *argv])
        run(args)
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return _exit_code(2)
    except RunError as exc:
        print(f"{prog}: error: {exc}; {_interrupted(args)}", file=sys.stderr)
        return _exit_code(1)
    except KeyboardInterrupt as exc:
        from tinytrain import distributed as dist

        if dist.is_initialized() and in_main_thread:  # mpiexec forwards a terminal's Ctrl-C:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one would cut this short
        signame = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        # Every rank says it: rank 0 alone could be stopped by another rank's MPI_Abort first.
        print(f"\n{signame}; {_interrupted(args)}", file=sys.stderr)
        return _exit_code(143 if isinstance(exc, Terminated) else 130)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
