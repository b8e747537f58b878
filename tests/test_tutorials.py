"""PyTorch's own tutorials, ported by changing their import lines, learn as they do in PyTorch.

``tests/tutorials/`` holds faithful copies of PyTorch's MNIST example, the Quickstart, two
pages of the 60-minute blitz, "What is torch.nn really?" and the scripts of "Learning PyTorch with
Examples"; each line that differs from PyTorch's is marked ``# tinytrain:`` and says what
it was (an import, or a smaller step count that both runs keep). Each test runs the copy
with tinytrain, and the same file with its imports turned back into PyTorch's, on the same
data (``torchvision_shim.py``: a part of the bundled mini MNIST, and learnable made-up
CIFAR-sized images; the nn tutorial's ``mnist.pkl.gz`` made of mini MNIST), and compares.
"""

from __future__ import annotations

import gzip
import pickle
import random
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain.data import MNISTMini

TUTORIALS = Path(__file__).parent / "tutorials"
MARK = re.compile(r"^(\s*)(.*?)\s*# tinytrain: was (.*)$")
#: a step count, or a size (a batch, a hidden layer), made smaller so that a test runs quickly
FEWER = re.compile(r"^(\s*)(.*?)\s*# tinytrain: (?:fewer steps|smaller), was (.*)$")


def is_import(code: str) -> bool:
    return re.match(r"(import|from) ", code) is not None


def as_pytorch(source: str) -> str:
    """The program as PyTorch's: each marked import back to what it was (imports of the
    ``*_shim.py`` stand-ins for torchvision, matplotlib and pandas stay: the data must be
    the same, and nothing is drawn; fewer steps stay fewer: the runs must compare)."""
    out = []
    for line in source.splitlines():
        m = MARK.match(line)
        if m and is_import(m.group(3)) and not re.search(r"\w_shim\b", m.group(2)):
            line = m.group(1) + m.group(3)
        out.append(line)
    return "\n".join(out) + "\n"


def tutorial_module(name: str):
    """A file for ``run``'s ``files``: tutorial ``name`` as the running library's (a program's
    own module, e.g. ``import model`` of a copy of pytorch/examples' ``model.py``)."""
    def content(lib: str) -> bytes:
        source = (TUTORIALS / name).read_text()
        return (source if lib == "tinytrain" else as_pytorch(source)).encode()
    return content


def run(name: str, lib: str, tmp_path: Path, monkeypatch, capsys, argv=(),
        files: dict | None = None) -> tuple[str, dict]:
    """Run tutorial ``name`` with ``lib`` ("tinytrain" or "torch") in ``tmp_path`` (with
    ``files`` written there first: bytes, or a function of ``lib`` that gives them, see
    :func:`tutorial_module`): its output and its global variables. The program's directory
    is first on ``sys.path``, as ``python program.py`` puts it; the modules it imports from
    there are forgotten afterwards (the other library's run imports its own)."""
    source = (TUTORIALS / name).read_text()
    program = tmp_path / lib / name
    program.parent.mkdir()
    for rel, content in (files or {}).items():
        (program.parent / rel).parent.mkdir(parents=True, exist_ok=True)
        (program.parent / rel).write_bytes(content(lib) if callable(content) else content)
    program.write_text(source if lib == "tinytrain" else as_pytorch(source))
    monkeypatch.chdir(program.parent)
    monkeypatch.syspath_prepend(str(TUTORIALS))
    import torchvision_shim  # on the path only now

    monkeypatch.setattr(torchvision_shim, "as_tensor",
                        tt.tensor if lib == "tinytrain" else torch.from_numpy)
    monkeypatch.setattr(torchvision_shim, "library", tt if lib == "tinytrain" else torch)
    monkeypatch.setattr(sys, "argv", [str(program), *argv])
    tt.manual_seed(0)
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)  # (NumPy's global generator: a program's np.random.random / normal)
    capsys.readouterr()
    monkeypatch.syspath_prepend(str(program.parent))
    try:
        variables = runpy.run_path(str(program), run_name="__main__")
    finally:
        for module_name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(program.parent)):
                del sys.modules[module_name]
        # a program's set_default_device is process-wide: torch's even as "cpu" installs a
        # function mode through which every later torch call dispatches twice (a wrapper a
        # later test patches onto torch.nn.functional then sees each call twice)
        torch.set_default_device(None)
        tt.set_default_device("cpu")
    return capsys.readouterr().out, variables


def test_the_copies_differ_from_pytorch_only_in_marked_import_lines():
    other_changes = {}
    for path in sorted(TUTORIALS.glob("*.py")):
        if path.name.endswith("_shim.py"):
            continue
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("#"):
                continue
            m, fewer = MARK.match(line), FEWER.match(line)
            if m:
                assert is_import(m.group(3)) and is_import(m.group(2)), (path.name, line)
            elif fewer:  # only counts and sizes made smaller: the same line, other numbers
                was, m = fewer.group(3), fewer
                assert re.sub(r"\d+", "N", was) == re.sub(r"\d+", "N", m.group(2)), line
                changed = [(int(a), int(b)) for a, b in zip(re.findall(r"\d+", was),
                                                            re.findall(r"\d+", m.group(2)))
                           if a != b]
                assert changed and all(a > b for a, b in changed), line  # each one smaller
            else:
                assert "tinytrain:" not in line or "tinytrain: differs" in line, line
            if "tinytrain: differs" in line:
                other_changes.setdefault(path.name, []).append(line)
    # next_functions[0][0]: README, "Differences from PyTorch"; the torch.func tutorials'
    # device = 'cuda' (PyTorch's CPU build needs 'cpu' too) and ensembling's .to('meta');
    # yunjey_pytorch_basics.py: three lines that fail with PyTorch 2.13 itself
    # (tests/test_ports10a.py runs them in both)
    assert {k: len(v) for k, v in other_changes.items()} == {
        "blitz_neural_networks.py": 1, "func_per_sample_grads.py": 1,
        "func_ensembling.py": 2, "func_neural_tangent_kernels.py": 1,
        "yunjey_pytorch_basics.py": 3}


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


def test_quickstart_tutorial(tmp_path, monkeypatch, capsys):
    """The "Quickstart": DataLoader over a data set of tensors, torch.accelerator, an MLP with
    SGD, `(pred.argmax(1) == y).type(torch.float)`, save / load of the state_dict, and
    `test_data[0][0].to(device)` for one prediction."""
    results = {}
    for lib in ("tinytrain", "torch"):
        out, v = run("quickstart_tutorial.py", lib, tmp_path, monkeypatch, capsys)
        assert "Shape of X [N, C, H, W]: " in out and "Using cpu device" in out, out
        assert re.search(r"Shape of y: .*64.* .*int64", out), out
        tests = re.findall(r"Accuracy: ([\d.]+)%, Avg loss: ([\d.]+)", out)
        assert len(tests) == 5, out
        losses = [float(loss) for _, loss in tests]
        # SGD at 1e-3 on 20 batches an epoch moves slowly, but every epoch downhill
        assert all(b < a for a, b in zip(losses, losses[1:])), losses
        assert re.search(r'Predicted: "[^"]+", Actual: "[^"]+"', out), out
        assert type(v["test_data"][0][0]).__module__.split(".")[0] == lib  # the library's tensor
        results[lib] = losses
    ours, theirs = results["tinytrain"], results["torch"]
    assert abs(ours[0] - theirs[0]) < 0.02 and abs(ours[-1] - theirs[-1]) < 0.02, results
    progress = [run[0] - run[-1] for run in (ours, theirs)]  # the same rate of descent
    assert abs(progress[0] - progress[1]) < 0.2 * progress[1], results


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


def mnist_pickle(n_train: int = 5000, n_valid: int = 1000) -> bytes:
    """The nn tutorial's ``mnist.pkl.gz`` (``(x, y)`` of train, valid and test: float32
    ``[n, 784]`` in [0, 1] and int64 ``[n]``), made of digits of the bundled mini set."""
    parts = []
    for train, n in ((True, n_train), (False, n_valid), (False, 10)):
        x, y = MNISTMini(train=train).get_batch(
            np.random.default_rng(n).permutation(5000 if train else 1000)[:n])
        parts.append((x.reshape(n, 784), y))
    return gzip.compress(pickle.dumps(tuple(parts)))


@pytest.mark.slow
def test_nn_tutorial(tmp_path, monkeypatch, capsys):
    """"What is torch.nn really?": every refactoring step trains, with both libraries."""
    files = {"data/mnist/mnist.pkl.gz": mnist_pickle()}
    results = {}
    for lib in ("tinytrain", "torch"):
        out, v = run("nn_tutorial.py", lib, tmp_path, monkeypatch, capsys, files=files)
        lines = out.splitlines()
        assert lines[0] == "(5000, 784)" and lines[-3] == "False", out  # no GPU here
        first = float(re.search(r"^tensor\(([\d.]+), grad_fn=<Neg", out, re.M).group(1))
        assert 1.8 < first < 2.8, out  # the random model's loss on a batch: about ln 10
        epochs = [float(x) for x in re.findall(r"^[01] (?:tensor\()?([\d.]+)", out, re.M)]
        assert len(epochs) == 12, out  # validation, fit(), 2 CNNs, wrapped, on the "GPU"
        model, xv, yv = v["model"], v["x_valid"], v["y_valid"]
        with (tt if lib == "tinytrain" else torch).no_grad():
            accuracy = v["accuracy"](model(xv.view(-1, 1, 28, 28)), yv).item()
        logistic, cnns = epochs[:4], epochs[4:]
        assert max(logistic[1::2]) < 0.8, (lib, epochs)  # a logistic regression learns MNIST
        assert all(b < a for a, b in zip(cnns[::2], cnns[1::2])), (lib, epochs)  # CNNs learn
        assert accuracy > 0.5, (lib, accuracy)  # 10% is chance
        results[lib] = epochs[-1]
    assert abs(results["tinytrain"] - results["torch"]) < 0.5, results


def losses(out: str) -> list[float]:
    return [float(x) for x in re.findall(r"^\d+ ([\d.e+-]+)$", out, re.M)]


@pytest.mark.parametrize("name", ["examples_polynomial_tensor.py",
                                  "examples_polynomial_autograd.py",
                                  "examples_polynomial_nn.py", "examples_polynomial_optim.py",
                                  "examples_polynomial_module.py", "examples_dynamic_net.py"])
def test_learning_pytorch_with_examples(name, tmp_path, monkeypatch, capsys):
    """Each script fits sin(x) with a polynomial from random weights (tinytrain's and
    PyTorch's generators differ, so the runs start apart): both must learn, and the cubic
    ones, nearly converged after their 2000 steps, about as far."""
    results = {}
    for lib in ("tinytrain", "torch"):
        out, v = run(name, lib, tmp_path, monkeypatch, capsys)
        curve = losses(out)
        assert re.search(r"^Result: y = [-\d.e]+ \+ [-\d.e]+ x \+ ", out, re.M), out
        assert curve[-1] < curve[0] / 2, (lib, curve)  # it fits
        results[lib] = curve
    if name == "examples_dynamic_net.py":  # 4,000 of its 30,000 steps: still far from done
        assert len(results["torch"]) == 2
    else:
        assert len(results["torch"]) == 20 and results["torch"][-1] < 30
        assert results["tinytrain"][-1] == pytest.approx(results["torch"][-1], rel=0.5)


def test_learning_pytorch_with_examples_custom_function(tmp_path, monkeypatch, capsys):
    """The ctx-style ``LegendrePolynomial3``, from fixed weights: the same numbers."""
    runs = {lib: run("examples_polynomial_custom_function.py", lib, tmp_path, monkeypatch,
                     capsys) for lib in ("tinytrain", "torch")}
    ours, theirs = (losses(runs[lib][0]) for lib in ("tinytrain", "torch"))
    assert len(ours) == 20 and ours[-1] < ours[0] / 3, ours
    np.testing.assert_allclose(ours, theirs, rtol=1e-3)
    for name in "abcd":
        assert runs["tinytrain"][1][name].item() == pytest.approx(
            runs["torch"][1][name].item(), rel=1e-3, abs=1e-6)
