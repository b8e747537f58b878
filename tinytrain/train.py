"""``python -m tinytrain.train``: train an MNIST model, the course's main job.

    python -m tinytrain.train                          # the default recipe (convnet, Adam, cosine)
    python -m tinytrain.train --preset infinitrain     # InfiniTrain's run: cnn, SGD lr 0.01
    python -m tinytrain.train --model mlp --epochs 3 --save runs/mlp.npz

The step is always ``zero_grad -> forward (model(x)) -> loss -> backward -> step``;
evaluation runs under ``no_grad``. ``--save`` writes model, optimizer, epoch and
RNG state atomically at the end of every epoch; ``--resume`` continues from such
a checkpoint up to ``--epochs`` in total, giving the same weights as an
uninterrupted run. With the cosine schedule the learning rate decays to 0 over
``--epochs``, so resume an interrupted run with the same ``--epochs``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tinytrain as tt
import tinytrain.nn.functional as F
from tinytrain import optim
from tinytrain.data import DataLoader
from tinytrain.data.datasets import DATASETS, load_dataset
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
                   help="samples per training step (default 64)")
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

    tt.manual_seed(args.seed)
    train_set, test_set, dataset_name = open_datasets(args)
    model = build_model(args.model).to(args.device)
    # on a GPU the data sets stay there: one copy per run, not one per batch
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, seed=args.seed,
                        device=args.device)
    test_loader = DataLoader(test_set, batch_size=args.eval_batch_size, device=args.device)
    opt = make_optimizer(args, model)
    sched = (optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
             if args.schedule == "cosine" else None)
    history = History()
    start_epoch = 0
    if args.resume:
        start_epoch = load_checkpoint(args.resume, args, model, opt, sched, history)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model {args.model} ({n_params:,} parameters) | {dataset_name}: {len(train_set):,} "
          f"train, {len(test_set):,} test | {args.optimizer} lr {args.lr:g}"
          + (f" momentum {args.momentum:g}" if args.optimizer == "sgd" else "")
          + f" ({args.schedule}) | batch {args.batch_size} | {args.device}")
    result = None
    for epoch in range(start_epoch, args.epochs):
        loader.set_epoch(epoch)
        t0 = time.perf_counter()
        with tqdm(total=len(loader), desc=f"epoch {epoch + 1}/{args.epochs}", unit="step",
                  leave=False, file=sys.stderr, mininterval=0.5) as bar:
            train_loss, seen = train_one_epoch(model, opt, sched, loader, args.device, bar,
                                               args.log_every, history, epoch * len(loader))
        seconds = time.perf_counter() - t0
        result = evaluate(model, test_loader, args.device)
        history.epoch_acc.append(result.accuracy)
        history.epoch_loss.append(train_loss)
        print(f"epoch {epoch + 1}/{args.epochs} | train loss {train_loss:.4f} | test acc "
              f"{100 * result.accuracy:.2f}% | {seconds:.1f} s | {seen / seconds:.0f} samples/s",
              flush=True)
        if args.save:
            save_checkpoint(args.save, args, model, opt, sched, epoch + 1, history)
    if result is None:  # the checkpoint already had every epoch: just evaluate
        result = evaluate(model, test_loader, args.device)
    print(f"test: {result.correct}/{result.total} correct | accuracy "
          f"{100 * result.accuracy:.2f}% | avg loss {result.avg_loss:.4f}")
    if args.plot:
        save_plot(history, args.plot)
        print(f"curves written to {args.plot}")
    return result


def save_checkpoint(path: str, args: argparse.Namespace, model: tt.nn.Module,
                    opt: optim.Optimizer, sched: Any, epoch: int, history: History) -> None:
    tt.save({
        "format": CHECKPOINT_FORMAT,
        "model_name": args.model,
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "optimizer_name": args.optimizer,
        "schedule": None if sched is None else sched.state_dict(),
        "rng": tt.get_rng_state(),
        "history": vars(history),
    }, path)


def load_checkpoint(path: str, args: argparse.Namespace, model: tt.nn.Module,
                    opt: optim.Optimizer, sched: Any, history: History) -> int:
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
    if sched is not None:
        saved_horizon = ck["schedule"]["T_max"]
        sched.load_state_dict({**ck["schedule"], "T_max": sched.T_max})
        if saved_horizon != sched.T_max:
            print(f"warning: the cosine schedule now decays over {sched.T_max} steps instead of "
                  f"{saved_horizon} (--epochs differs from the run that saved {path})",
                  file=sys.stderr)
    tt.set_rng_state(ck["rng"])
    for k, v in ck["history"].items():
        setattr(history, k, list(v))
    print(f"resumed from {path} after epoch {ck['epoch']}")
    return int(ck["epoch"])


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits 2 on unknown flags or choices
    try:
        run(resolve_config(args))
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        where = f"; the last checkpoint in {args.save} is intact" if args.save else ""
        print(f"\ninterrupted{where}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
