"""``python -m tinytrain.train``: train an MNIST model, the course's main job.

    python -m tinytrain.train                          # the default recipe (convnet, Adam, cosine)
    python -m tinytrain.train --preset infinitrain     # InfiniTrain's run: cnn, SGD lr 0.01
    python -m tinytrain.train --model mlp --epochs 3 --save runs/mlp.npz
    python -m tinytrain.train --nproc 2                # 2 processes (mpiexec), data-parallel
    mpiexec -n 2 python -m tinytrain.train             # the same, started by hand

The step is always ``zero_grad -> forward (model(x)) -> loss -> backward -> step``;
evaluation runs under ``no_grad``. ``--save`` writes model, optimizer, epoch and
RNG state atomically at the end of every epoch; ``--resume`` continues from such
a checkpoint up to ``--epochs`` in total, giving the same weights as an
uninterrupted run. With the cosine schedule the learning rate decays to 0 over
``--epochs``, so resume an interrupted run with the same ``--epochs``.

Under ``mpiexec`` (or ``--nproc N``) every process is a rank of a data-parallel run
(:mod:`tinytrain.distributed`): each trains on its shard of every epoch
(``DistributedSampler``) with ``--batch-size`` samples per step, so the global batch is
``--batch-size`` x ranks; ``DistributedDataParallel`` averages the gradients (MPI between CPU
ranks, NCCL between GPUs, one per rank). Evaluation is sharded and reduced once per epoch.
Rank 0 alone prints, plots and saves; a checkpoint resumes on any number of ranks.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import optim
from tinytrain.data import DataLoader, DistributedSampler
from tinytrain.data.datasets import DATASETS, load_dataset
from tinytrain.distributed import launch
from tinytrain.models import MODELS, build_model

# InfiniTrain's own MNIST run: plain SGD, lr 0.01, batch 64, one epoch.
PRESETS: dict[str, dict[str, Any]] = {
    "infinitrain": dict(model="cnn", optimizer="sgd", lr=0.01, momentum=0.0, batch_size=64,
                        epochs=1, schedule="constant"),
}
DEFAULTS: dict[str, Any] = dict(model="convnet", optimizer="adam", lr=None, momentum=0.9,
                                batch_size=64, epochs=1, schedule="cosine")
DEFAULT_LR = {"adam": 2e-3, "sgd": 0.05}
CHECKPOINT_FORMAT = 1


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tinytrain.train",
        description="Train an MNIST model with tinytrain and report its test accuracy.",
    )
    p.add_argument("--model", choices=sorted(MODELS), default=None,
                   help="network to train (default: convnet; the infinitrain preset: cnn)")
    p.add_argument("--dataset", choices=sorted(DATASETS), default=None,
                   help="data set (default: mnist, falling back to the bundled mnist-mini with "
                        "a warning when full MNIST is neither present nor downloadable)")
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
                        "(default 1)")
    p.add_argument("--lr", type=float, default=None,
                   help="initial learning rate (default: 2e-3 for adam, 0.05 for sgd)")
    p.add_argument("--schedule", choices=["cosine", "constant"], default=None,
                   help="learning-rate schedule: cosine decays it to 0 over all --epochs "
                        "(default), constant keeps it")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default=None,
                   help="optimizer (default adam; sgd uses --momentum)")
    p.add_argument("--momentum", type=float, default=None,
                   help="SGD momentum (default 0.9; the infinitrain preset uses 0)")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds initialisation, shuffling and dropout (default 0)")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="infinitrain: reproduce InfiniTrain's run (model cnn unless --model "
                        "mlp, plain SGD, lr 0.01, constant, batch 64, 1 epoch)")
    p.add_argument("--save", metavar="PATH", default=None,
                   help="write a checkpoint (.npz) at the end of every epoch, atomically")
    p.add_argument("--resume", metavar="PATH", default=None,
                   help="continue from a checkpoint written by --save")
    p.add_argument("--log-every", type=int, default=20,
                   help="steps between updates of the progress bar's loss (default 20)")
    p.add_argument("--plot", metavar="PATH", default=None,
                   help="save loss and accuracy curves as a PNG")
    p.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="train data-parallel on N processes: re-runs this command under "
                        "mpiexec (CPU ranks split the cores; with --device cuda, one GPU each)")
    p.add_argument("--eval-batch-size", type=int, default=1000, help=argparse.SUPPRESS)
    return p


def resolve_config(args: argparse.Namespace) -> argparse.Namespace:
    """Fill unset options from the preset, then the defaults, and validate them."""
    preset = PRESETS.get(args.preset, {})
    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, preset.get(key, default))
    if args.lr is None:
        args.lr = DEFAULT_LR[args.optimizer]
    if not args.lr > 0 or not math.isfinite(args.lr):
        raise UsageError(f"--lr must be a positive number, got {args.lr}")
    if args.batch_size <= 0:
        raise UsageError(f"--batch-size must be a positive integer, got {args.batch_size}")
    if args.epochs <= 0:
        raise UsageError(f"--epochs must be a positive integer, got {args.epochs}")
    if args.momentum < 0:
        raise UsageError(f"--momentum must be >= 0, got {args.momentum}")
    if args.log_every <= 0:
        raise UsageError(f"--log-every must be a positive integer, got {args.log_every}")
    if args.data_dir is not None:
        d = Path(args.data_dir).expanduser()
        if not d.is_dir():
            raise UsageError(f"--data-dir {d} is not a readable directory")
        if not os.access(d, os.R_OK | os.X_OK):
            raise UsageError(f"--data-dir {d} is not readable (permission denied)")
    if args.resume is not None and not Path(args.resume).is_file():
        raise UsageError(f"--resume {args.resume}: no such checkpoint file")
    if args.device == "cuda" and not tt.cuda_is_available():
        raise UsageError("--device cuda: no usable GPU (run `python -m tinytrain.doctor`)")
    if args.nproc is not None and args.nproc <= 0:
        raise UsageError(f"--nproc must be a positive integer, got {args.nproc}")
    started = launch.launched_world_size()
    if args.nproc is not None and started > 1 and args.nproc != started:
        raise UsageError(f"--nproc {args.nproc}, but mpiexec started {started} processes")
    return args


def open_datasets(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """The train and test sets, falling back to mnist-mini only when --dataset was not given."""
    name = args.dataset or "mnist"
    try:
        train = load_dataset(name, args.data_dir, train=True, download=not args.no_download)
        test = load_dataset(name, args.data_dir, train=False, download=not args.no_download)
        return train, test, name
    except (OSError, ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0].rstrip(":")
        if args.dataset is not None:
            raise UsageError(f"--dataset {name}: {reason}") from None
        print(f"warning: full MNIST is not available ({reason}); training on the bundled "
              "mnist-mini instead. Set TINYTRAIN_DATA or --data-dir to a folder holding mnist/.",
              file=sys.stderr)
        return (load_dataset("mnist-mini", train=True), load_dataset("mnist-mini", train=False),
                "mnist-mini")


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
    """One pass over ``loader``; returns (mean training loss, samples seen)."""
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
        running = running + loss.data  # stays on the device: no sync per step
        window += 1
        seen += y.shape[0]
        if window == log_every or i == len(loader) - 1:
            mean = float(running) / window
            total_loss += mean * window
            history.step_loss.append(mean)
            history.step_index.append(step0 + i + 1)
            bar.set_postfix(loss=f"{mean:.4f}",
                            samples_s=f"{seen / (time.perf_counter() - t0):.0f}")
            running, window = 0.0, 0
        bar.update(1)
    return total_loss / max(len(loader), 1), seen


def save_plot(history: History, path: str) -> None:
    """Loss per logged window and test accuracy per epoch, written atomically as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
    a.plot(history.step_index, history.step_loss)
    a.set(xlabel="step", ylabel="training loss", yscale="log", title="loss")
    epochs = range(1, len(history.epoch_acc) + 1)
    b.plot(epochs, [100 * v for v in history.epoch_acc], "o-")
    b.set(xlabel="epoch", ylabel="test accuracy (%)", title="accuracy", xticks=list(epochs))
    b.set_ylim(top=100)
    fig.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, target)


def run(args: argparse.Namespace) -> EvalResult:
    """Train as configured by ``args`` (already resolved); returns the final test result."""
    from tqdm.auto import tqdm

    ranks = start_ranks(args)
    say = print if ranks.main else _quiet
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
    start_epoch = 0
    if args.resume:
        start_epoch = load_checkpoint(args.resume, args, net, opt, sched, history, ranks)
    n_params = sum(p.numel() for p in net.parameters())
    batch = (f"batch {args.batch_size}" if ranks.size == 1 else
             f"batch {args.batch_size} x {ranks.size} ranks = {args.batch_size * ranks.size}")
    say(f"model {args.model} ({n_params:,} parameters) | {dataset_name}: {len(train_set):,} "
        f"train, {len(test_set):,} test | {args.optimizer} lr {args.lr:g}"
        + (f" momentum {args.momentum:g}" if args.optimizer == "sgd" else "")
        + f" ({args.schedule}) | {batch} | {args.device}")
    result = None
    for epoch in range(start_epoch, args.epochs):
        loader.set_epoch(epoch)
        t0 = time.perf_counter()
        with tqdm(total=len(loader), desc=f"epoch {epoch + 1}/{args.epochs}", unit="step",
                  leave=False, file=sys.stderr, mininterval=0.5, disable=not ranks.main) as bar:
            train_loss, seen = train_one_epoch(model, opt, sched, loader, args.device, bar,
                                               args.log_every, history, epoch * len(loader))
        seconds = time.perf_counter() - t0
        result = evaluate_on_ranks(net, test_set, args, ranks)
        train_loss = mean_over_ranks(train_loss, ranks)
        history.epoch_acc.append(result.accuracy)
        history.epoch_loss.append(train_loss)
        say(f"epoch {epoch + 1}/{args.epochs} | train loss {train_loss:.4f} | test acc "
            f"{100 * result.accuracy:.2f}% | {seconds:.1f} s | "
            f"{seen * ranks.size / seconds:.0f} samples/s", flush=True)
        if args.save:
            save_checkpoint(args.save, args, net, opt, sched, epoch + 1, history, ranks)
    if result is None:  # the checkpoint already had every epoch: just evaluate
        result = evaluate_on_ranks(net, test_set, args, ranks)
    if ranks.size > 1:
        model.check_consistency()
        say(f"parameters bit-identical on all {ranks.size} ranks")
    say(f"test: {result.correct}/{result.total} correct | accuracy "
        f"{100 * result.accuracy:.2f}% | avg loss {result.avg_loss:.4f}")
    if args.plot and ranks.main:
        save_plot(history, args.plot)
        print(f"curves written to {args.plot}")
    stop_ranks(ranks)
    return result


# ------------------------------------------------------------------ several processes


@dataclass(frozen=True)
class Ranks:
    """This process's place in a data-parallel run: rank 0 of 1 when it runs alone."""

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """Rank 0 prints, plots and writes files; the others stay quiet."""
        return self.rank == 0


ALONE = Ranks()


def _quiet(*args: Any, **kwargs: Any) -> None:
    pass


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
    if ranks.size == 1:
        return DataLoader(train_set, batch_size=args.batch_size, shuffle=True, seed=args.seed)
    sampler = DistributedSampler(train_set, ranks.size, ranks.rank, shuffle=True,
                                 seed=args.seed)
    return DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)


def evaluate_sharded(model: tt.nn.Module, dataset: Any, batch_size: int,
                     device: str = "cpu") -> EvalResult:
    """Each rank evaluates its disjoint shard; one SUM all-reduce of (count, correct, loss
    sum) gives every rank the counts of the whole set, exactly."""
    from tinytrain.distributed.utils import shard_dataset, sum_over_ranks

    mine = evaluate(model, DataLoader(shard_dataset(dataset), batch_size=batch_size), device)
    total, correct, loss_sum = sum_over_ranks(mine.total, mine.correct, mine.loss_sum)
    return EvalResult(int(total), int(correct), loss_sum)


def evaluate_on_ranks(net: tt.nn.Module, test_set: Any, args: argparse.Namespace,
                      ranks: Ranks) -> EvalResult:
    if ranks.size == 1:
        return evaluate(net, DataLoader(test_set, batch_size=args.eval_batch_size), args.device)
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


def save_checkpoint(path: str, args: argparse.Namespace, model: tt.nn.Module,
                    opt: optim.Optimizer, sched: Any, epoch: int, history: History,
                    ranks: Ranks = ALONE) -> None:
    """Rank 0 writes the checkpoint (atomically); every rank must call it (RNG states)."""
    states = rng_states(ranks)
    if not ranks.main:
        return
    tt.save({
        "format": CHECKPOINT_FORMAT,
        "model_name": args.model,
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "optimizer_name": args.optimizer,
        "schedule": None if sched is None else sched.state_dict(),
        "rng": states[0],
        "rng_per_rank": states,
        "world_size": ranks.size,
        "history": vars(history),
    }, path)


def load_checkpoint(path: str, args: argparse.Namespace, model: tt.nn.Module,
                    opt: optim.Optimizer, sched: Any, history: History,
                    ranks: Ranks = ALONE) -> int:
    """Restore model, optimizer, RNG and history; return the number of epochs already done."""
    try:
        ck = tt.load(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
        raise UsageError(f"--resume {path} is not a tinytrain.train checkpoint")
    if ck["model_name"] != args.model:
        raise UsageError(f"--resume {path} holds a '{ck['model_name']}' model but --model is "
                         f"'{args.model}'")
    if ck["optimizer_name"] != args.optimizer:
        raise UsageError(f"--resume {path} was trained with {ck['optimizer_name']} but "
                         f"--optimizer is {args.optimizer}")
    try:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
    except (KeyError, ValueError) as exc:
        raise UsageError(f"--resume {path}: {exc}") from None
    if (ck["schedule"] is None) != (sched is None):
        raise UsageError(f"--resume {path} was trained with a "
                         f"{'constant' if ck['schedule'] is None else 'cosine'} schedule but "
                         f"--schedule is {args.schedule}")
    saved_ranks = int(ck.get("world_size", 1))
    if sched is not None:
        saved_horizon = ck["schedule"]["T_max"]
        state = {**ck["schedule"], "T_max": sched.T_max}
        if saved_ranks != ranks.size:  # steps per epoch changed: continue at the same epoch
            state["last_epoch"] = int(ck["epoch"]) * (sched.T_max // args.epochs)
        sched.load_state_dict(state)
        if saved_horizon != sched.T_max and saved_ranks == ranks.size and ranks.main:
            print(f"warning: the cosine schedule now decays over {sched.T_max} steps instead of "
                  f"{saved_horizon} (--epochs differs from the run that saved {path})",
                  file=sys.stderr)
    restore_rng(ck, args, ranks)
    for k, v in ck["history"].items():
        setattr(history, k, list(v))
    if ranks.main:
        print(f"resumed from {path} after epoch {ck['epoch']}"
              + (f" (saved by {saved_ranks} rank(s), continued on {ranks.size})"
                 if saved_ranks != ranks.size else ""))
    return int(ck["epoch"])


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)  # argparse itself exits 2 on unknown flags or choices
    try:
        resolve_config(args)
        if args.nproc and args.nproc > 1 and launch.launched_world_size() == 1:
            return launch.relaunch(args.nproc, ["-m", "tinytrain.train", *argv])
        run(args)
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return _exit_code(2)
    except KeyboardInterrupt:
        from tinytrain import distributed as dist

        if dist.is_initialized():  # mpiexec forwards the terminal's Ctrl-C: a second one
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # would cut this message short
        where = f"; the last checkpoint in {args.save} is intact" if args.save else ""
        print(f"\ninterrupted{where}", file=sys.stderr)
        return _exit_code(130)
    return 0


def _exit_code(code: int) -> int:
    """A rank that ends with an error makes every rank stop (MPI_Abort at exit), instead of
    leaving the others waiting in a collective for it."""
    from tinytrain import distributed as dist

    if dist.is_initialized():
        launch.abort_at_exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
