"""PyTorch's own tutorials, ported by changing their import lines, learn as they do in PyTorch.

``tests/tutorials/`` holds faithful copies of PyTorch's MNIST example and of two pages of
the 60-minute blitz; each line that differs from PyTorch's is marked ``# tinytrain:`` and
says what it was. Each test runs the copy with tinytrain, and the same file with those
lines turned back into PyTorch's, on the same data (``torchvision_shim.py``: a part of the
bundled mini MNIST, and learnable made-up CIFAR-sized images), and compares.
"""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest
import torch

import tinytrain as tt

TUTORIALS = Path(__file__).parent / "tutorials"
MARK = re.compile(r"^(\s*)(.*?)\s*# tinytrain: was (.*)$")


def as_pytorch(source: str) -> str:
    """The program as PyTorch's: each marked line back to what it was (torchvision stays the
    shim: the data must be the same)."""
    out = []
    for line in source.splitlines():
        m = MARK.match(line)
        if m and "torchvision" not in m.group(3):
            line = m.group(1) + m.group(3)
        out.append(line)
    return "\n".join(out) + "\n"


def run(name: str, lib: str, tmp_path: Path, monkeypatch, capsys, argv=()) -> tuple[str, dict]:
    """Run tutorial ``name`` with ``lib`` ("tinytrain" or "torch") in ``tmp_path``: its
    output and its global variables."""
    source = (TUTORIALS / name).read_text()
    program = tmp_path / lib / name
    program.parent.mkdir()
    program.write_text(source if lib == "tinytrain" else as_pytorch(source))
    monkeypatch.chdir(program.parent)
    monkeypatch.syspath_prepend(str(TUTORIALS))
    monkeypatch.setattr(sys, "argv", [str(program), *argv])
    tt.manual_seed(0)
    torch.manual_seed(0)
    capsys.readouterr()
    variables = runpy.run_path(str(program), run_name="__main__")
    return capsys.readouterr().out, variables


def test_the_copies_differ_from_pytorch_only_in_marked_import_lines():
    other_changes = {}
    for path in sorted(TUTORIALS.glob("*.py")):
        if path.name == "torchvision_shim.py":
            continue
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("#"):
                continue
            m = MARK.match(line)
            if m:
                assert re.match(r"(import|from) ", m.group(2)), (path.name, line)
                assert re.match(r"(import|from) ", m.group(3)), (path.name, line)
            elif "tinytrain: differs" in line:
                other_changes.setdefault(path.name, []).append(line)
    # next_functions[0][0] and f.data.sub_(): README, "Differences from PyTorch"
    assert {k: len(v) for k, v in other_changes.items()} == {"blitz_neural_networks.py": 2}


@pytest.mark.slow
def test_pytorch_mnist_example(tmp_path, monkeypatch, capsys):
    argv = ["--epochs", "2", "--log-interval", "5", "--save-model"]
    results = {}
    for lib in ("tinytrain", "torch"):
        out, _ = run("pytorch_mnist_example.py", lib, tmp_path, monkeypatch, capsys, argv)
        tests = re.findall(r"Test set: Average loss: ([\d.]+), Accuracy: (\d+)/(\d+)", out)
        assert len(tests) == 2, out
        (loss1, _, _), (loss2, correct, total) = tests
        assert int(total) == 500 and float(loss2) < float(loss1), out  # it learns
        results[lib] = int(correct) / int(total)
        assert re.search(r"Train Epoch: 2 \[960/1280 \(75%\)\]\tLoss: [\d.]+", out), out
    assert results["tinytrain"] > 0.85, results  # 10% is chance
    assert abs(results["tinytrain"] - results["torch"]) < 0.06, results
    state = tt.load(tmp_path / "tinytrain" / "mnist_cnn.pt")
    assert list(state) == list(torch.load(tmp_path / "torch" / "mnist_cnn.pt", weights_only=True))


@pytest.mark.slow
def test_blitz_cifar10_tutorial(tmp_path, monkeypatch, capsys):
    results = {}
    for lib in ("tinytrain", "torch"):
        out, _ = run("blitz_cifar10_tutorial.py", lib, tmp_path, monkeypatch, capsys)
        (accuracy,) = re.findall(r"Accuracy of the network on the 10000 test images: (\d+) %", out)
        per_class = re.findall(r"Accuracy for class: (\w+)\s* is ([\d.]+) %", out)
        assert len(per_class) == 10 and "Predicted: " in out and out.rstrip().endswith("cpu")
        results[lib] = int(accuracy)
    assert results["tinytrain"] >= 60, results  # 10% is chance
    assert abs(results["tinytrain"] - results["torch"]) <= 15, results


def test_blitz_neural_networks(tmp_path, monkeypatch, capsys):
    for lib in ("tinytrain", "torch"):
        out, v = run("blitz_neural_networks.py", lib, tmp_path, monkeypatch, capsys)
        assert len(v["params"]) == 10 and tuple(v["params"][0].size()) == (6, 1, 5, 5)
        assert tuple(v["out"].shape) == (1, 10) and tuple(v["target"].shape) == (1, 10)
        assert "conv1.bias.grad before backward\nNone\n" in out
        assert tuple(v["net"].conv1.bias.grad.shape) == (6,)
        loss = v["loss"]
        assert loss.ndim == 0 and loss.grad_fn is not None and loss.item() > 0
        with (tt if lib == "tinytrain" else torch).no_grad():  # the optimizer step lowered it
            assert v["criterion"](v["net"](v["input"]), v["target"]).item() < loss.item()
