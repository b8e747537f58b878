"""The training command: results, checkpoints, resume, interruption, bad input.

Runs on the bundled mnist-mini set (offline, seconds) with the small ``mlp``;
the dropout model ``convnet`` checks that resume restores the RNG too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinytrain as tt
from tinytrain import train as train_mod
from tinytrain.train import main

MINI = ["--dataset", "mnist-mini", "--no-download", "--log-every", "10"]


def _weights(path: Path) -> dict[str, np.ndarray]:
    ck = tt.load(path)
    return {k: v.numpy() for k, v in ck["model"].items()}


@pytest.mark.parametrize("model,extra", [
    ("mlp", ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--schedule",
             "constant"]),
    ("convnet", ["--optimizer", "adam", "--bs", "256", "--schedule", "constant"]),
])
def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path, model, extra):
    """1 epoch, then resume for a 2nd == 2 epochs straight (dropout RNG included)."""
    args = ["--model", model, *MINI, *extra]
    assert main([*args, "--epochs", "2", "--save", str(tmp_path / "straight.npz")]) == 0
    assert main([*args, "--epochs", "1", "--save", str(tmp_path / "split.npz")]) == 0
    one_epoch = _weights(tmp_path / "split.npz")
    assert main([*args, "--epochs", "2", "--resume", str(tmp_path / "split.npz"),
                 "--save", str(tmp_path / "split.npz")]) == 0
    straight, split = _weights(tmp_path / "straight.npz"), _weights(tmp_path / "split.npz")
    assert straight.keys() == split.keys()
    for k in straight:
        np.testing.assert_array_equal(straight[k], split[k], err_msg=k)
        assert not np.array_equal(one_epoch[k], split[k]), f"{k} did not train in epoch 2"
    ck = tt.load(tmp_path / "split.npz")
    assert ck["epoch"] == 2 and ck["settings"]["model"] == model


def _interrupt_in_epoch(monkeypatch, epoch: int) -> None:
    """Make the training loop raise KeyboardInterrupt (Ctrl-C) when epoch ``epoch`` starts."""
    real = train_mod.train_one_epoch
    calls = {"n": 0}

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == epoch:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(train_mod, "train_one_epoch", interrupted)


def test_resume_after_an_interrupt_continues_the_cosine_schedule_exactly(tmp_path, monkeypatch):
    args = ["--model", "mlp", *MINI, "--optimizer", "adam", "--epochs", "3"]
    assert main([*args, "--save", str(tmp_path / "straight.npz")]) == 0
    with monkeypatch.context() as m:
        _interrupt_in_epoch(m, 3)
        assert main([*args, "--save", str(tmp_path / "split.npz")]) == 130
    ck = tt.load(tmp_path / "split.npz")
    assert ck["epoch"] == 2 and ck["schedule"]["last_epoch"] == 2 * 79  # 5,000 / 64 -> 79 steps
    assert main([*args, "--resume", str(tmp_path / "split.npz"),
                 "--save", str(tmp_path / "split.npz")]) == 0
    straight, split = _weights(tmp_path / "straight.npz"), _weights(tmp_path / "split.npz")
    for k in straight:
        np.testing.assert_array_equal(straight[k], split[k], err_msg=k)


def test_the_mlp_learns_and_the_output_has_the_promised_lines(capsys, tmp_path):
    plot = tmp_path / "curves.png"
    assert main(["--model", "mlp", *MINI, "--optimizer", "sgd", "--lr", "0.1",
                 "--epochs", "2", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("epoch ")]
    assert len(lines) == 2 and lines[1].startswith("epoch 2/2 | train loss ")
    assert " | test acc " in lines[1] and lines[1].endswith("samples/s")
    final = next(line for line in out.splitlines() if line.startswith("test: "))
    correct, total = (int(v) for v in final.split()[1].split("/"))
    assert total == 1000 and correct / total > 0.85  # 5,000 digits, 2 epochs
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_interrupt_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    ck = tmp_path / "ck.npz"
    _interrupt_in_epoch(monkeypatch, 2)
    code = main(["--model", "mlp", *MINI, "--epochs", "3", "--save", str(ck)])
    assert code == 130
    assert "intact" in capsys.readouterr().err
    assert tt.load(ck)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]  # no temporary files left


def test_default_falls_back_to_mnist_mini_with_a_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TINYTRAIN_DATA", str(tmp_path))  # the default root, holding no MNIST
    assert main(["--model", "mlp", "--no-download", "--optimizer", "sgd", "--lr", "0.1"]) == 0
    captured = capsys.readouterr()
    warning = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "mnist-mini" in warning[0]
    assert "mnist-mini: 5,000 train" in captured.out


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tinytrain.train", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,expected", [
    (["--model", "resnet"], "invalid choice: 'resnet'"),
    (["--dataset", "cifar"], "invalid choice: 'cifar'"),
    (["--lr", "0"], "--lr must be a positive finite number"),
    (["--lr", "-1"], "--lr must be a positive finite number"),
    (["--batch-size", "0"], "--batch-size must be a positive integer"),
    (["--bs", "-3"], "--batch-size must be a positive integer"),
    (["--epochs", "0"], "--epochs must be a positive integer"),
    (["--data-dir", "/nonexistent/tinytrain"], "is not a readable directory"),
    (["--resume", "/nonexistent/ck.npz"], "no such checkpoint file"),
])
def test_bad_input_is_one_line_and_exit_code_2(args, expected):
    r = _cli(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    error_lines = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and expected in error_lines[0], r.stderr


def test_missing_full_mnist_names_the_fix(tmp_path):
    r = _cli("--dataset", "mnist", "--data-dir", str(tmp_path), "--no-download")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "train-images-idx3-ubyte.gz" in r.stderr or "TINYTRAIN_DATA" in r.stderr


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    ck = tmp_path / "mlp.npz"
    assert main(["--model", "mlp", *MINI, "--save", str(ck)]) == 0
    r = _cli("--model", "cnn", *MINI, "--resume", str(ck))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--model cnn differs from the checkpoint's mlp" in r.stderr


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path):
    bogus = tmp_path / "bogus.npz"
    bogus.write_bytes(b"not a zip file")
    r = _cli("--model", "mlp", *MINI, "--resume", str(bogus))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "bogus.npz" in r.stderr


def test_infinitrain_preset_is_plain_sgd_on_the_cnn():
    args = train_mod.resolve_config(train_mod.build_parser().parse_args(["--preset",
                                                                         "infinitrain"]))
    assert (args.model, args.optimizer, args.lr, args.momentum, args.batch_size, args.epochs,
            args.schedule) == ("cnn", "sgd", 0.01, 0.0, 64, 1, "constant")
    args = train_mod.resolve_config(train_mod.build_parser().parse_args(
        ["--preset", "infinitrain", "--model", "mlp"]))
    assert args.model == "mlp" and args.optimizer == "sgd" and args.lr == 0.01
