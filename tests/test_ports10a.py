"""Yunjey Choi's pytorch-tutorial (yunjey/pytorch-tutorial, MIT License), ported to tinytrain
by its imports, run with tinytrain and with PyTorch on the same data and the same random
numbers (``Draws`` / ``run_both`` of tests/test_ports9.py), and what porting it found.

Programs (whole scripts in ``tests/tutorials/yunjey_*.py``, changed lines marked
``# tinytrain:``): 01-basics (pytorch_basics, linear and logistic regression, the
feed-forward network), 02-intermediate (the CNN, the deep residual network, the LSTM and the
bidirectional LSTM that read MNIST rows, the LSTM language model with its ``data_utils.py``)
and 03-advanced (the MLP GAN and the VAE). Left out: neural_style_transfer and
image_captioning, which need torchvision's pretrained VGG-19 / ResNet-152 weights and COCO
(not available offline).

The MNIST programs read a part of mini MNIST (``torchvision_shim``; each test sets how much,
so that a run takes a second or two), CIFAR-10 is the shim's made-up learnable images, and
the language model reads a tiny made-up ``data/train.txt``. Where a program's tensors follow
the default dtype (the shim's ``ToTensor`` gives the default dtype, as torchvision's does for
an image), both runs are float64 and their printed numbers, saved checkpoints, sampled text
and saved images agree to 1e-9.

What porting found in the package (each with a test against torch below): ``tt.save`` of a
whole model refused a class from any module whose name begins with "torch" (a user's
``torch_utils``, here ``torchvision_shim``); ``RandomSampler`` of an empty data set (a
DataLoader's ``shuffle=True``) did not raise PyTorch's ValueError; ``iter(loader)`` had no
``len()``; and, probing the programs' neighbourhood, ``print(model.load_state_dict(...,
strict=False))`` printed another name than PyTorch's (``print(t.max(1))`` too: port10b fixed
it meanwhile, tests/test_ports10b.py),
``fill_`` took a one-element 1-D tensor and ``multinomial`` 0 samples that PyTorch refuses,
random fillers of integer tensors raised other error types (``uniform_`` filled silently),
``binary_cross_entropy`` of values outside [0, 1], ``t.requires_grad = 1`` and an unknown
device name raised ValueError / TypeError where PyTorch raises RuntimeError, the MSE/L1
size-mismatch warning had other words, and ``print(tt.device('cuda:0'))`` printed ``cuda``.
"""

from __future__ import annotations

import pickle
import re
import sys
import types
import warnings

import numpy as np
import pytest
import torch
from test_ports9 import _diff, _same_but_for_rounding, _same_plots, numbers, run_both
from test_tutorials import TUTORIALS, tutorial_module

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")


@pytest.fixture
def shim(monkeypatch):
    """``torchvision_shim``, its recorded images emptied."""
    monkeypatch.syspath_prepend(str(TUTORIALS))
    import torchvision_shim

    torchvision_shim.saved_images.clear()
    return torchvision_shim


def _compare(runs, rtol=1e-9, atol=1e-12):
    """The two outputs alike (but for rounding and README's documented differences), their
    numbers within ``rtol``: ``(output, tinytrain's globals, PyTorch's globals)``."""
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=rtol, atol=atol)
    return ours, v, w


def _same_checkpoints(tmp_path, name: str, rtol=1e-9, atol=1e-12, dtype="float64",
                      noise: tuple[str, ...] = ()) -> dict:
    """The state dict each run saved in ``name`` (each read by its own library, with
    ``weights_only=True``): the same keys, dtypes and values (``noise``: entries compared to
    1e-6 only, see the CNN's test). tinytrain's is returned."""
    ours = tt.load(tmp_path / "tinytrain" / name, weights_only=True)
    theirs = torch.load(tmp_path / "torch" / name, weights_only=True)
    assert list(ours) == list(theirs)
    for key, p in ours.items():
        q = theirs[key]
        assert p.dtype.name == str(q.dtype).removeprefix("torch."), key
        assert p.dtype.name in (dtype, "int64"), key  # (num_batches_tracked: int64)
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=rtol,
                                   atol=1e-6 if key in noise else atol, err_msg=key)
    return ours


def _steps(pattern: str, text: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, text)]


def _saved_images(shim, names: list[str], rtol=1e-9, atol=1e-12) -> list[np.ndarray]:
    """``save_image``'s calls of the two runs (tinytrain's, then PyTorch's): ``names`` in
    this order in each, the same images. tinytrain's arrays are returned."""
    calls = shim.saved_images
    assert [c[0] for c in calls] == names * 2, [c[0] for c in calls]
    half = len(names)
    for (path, ours, _), (_, theirs, _) in zip(calls[:half], calls[half:]):
        assert ours.dtype == theirs.dtype == np.float64, path
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=path)
    return [c[1] for c in calls[:half]]


# ------------------------------------------------------------------ 01-basics


def test_pytorch_basics(tmp_path, monkeypatch, capsys, shim):
    """Autograd on 0-d tensors (``print(x.grad)``: ``tensor(2.)``), ``nn.Linear`` printed as
    Parameters, MSELoss and one SGD step, ``from_numpy`` / ``.numpy()``, the CIFAR-10 data set
    with ``ToTensor``, a shuffling DataLoader and ``next(iter)``, a custom Dataset, a
    "pretrained" ResNet-18 frozen by ``requires_grad = False`` with a new ``fc`` on a
    ``randn(64, 3, 224, 224)`` batch, the whole model saved and loaded, and its state dict.
    The three lines that fail with PyTorch 2.13 itself (marked in the copy) fail alike here."""
    monkeypatch.setattr(shim, "CIFAR_SIZES", {True: 200, False: 100})
    runs = run_both("yunjey_pytorch_basics.py", tmp_path, monkeypatch, capsys)
    ours, v, w = _compare(runs, rtol=1e-5, atol=1e-6)
    assert ours.startswith("tensor(2.)\ntensor(1.)\ntensor(1.)\nw:  Parameter containing:\n")
    loss, after = (float(x) for x in re.findall(
        r"^loss(?: after 1 step optimization)?:  ([\d.]+)$", ours, re.M))
    assert after < loss, ours  # the SGD step went downhill
    assert "(3, 32, 32)\n" in ours and ours.endswith("(64, 100)\n")
    np.testing.assert_array_equal(v["z"], np.array([[1, 2], [3, 4]]))
    assert v["image"].shape == (3, 32, 32) and v["image"].dtype == tt.float32
    np.testing.assert_array_equal(v["image"].numpy(), w["image"].numpy())
    labels = v["labels"]  # the last batch of the epoch: 200 = 3 * 64 + 8
    assert labels.shape == (8,) and labels.dtype == tt.int64
    np.testing.assert_array_equal(labels.numpy(), w["labels"].numpy())  # (shuffle replayed)
    # the frozen "pretrained" layers, the new fc (replayed init), the same outputs
    assert not any(p.requires_grad for name, p in v["resnet"].named_parameters()
                   if not name.startswith("fc."))
    assert v["outputs"].requires_grad and v["outputs"].shape == (64, 100)
    np.testing.assert_allclose(v["outputs"].detach().numpy(), w["outputs"].detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    # the whole model, pickled and loaded: the class of the shim's module, the same state
    model = v["model"]
    assert type(model).__name__ == "ResNet_tinytrain" and model is not v["resnet"]
    for (key, p), (_, q) in zip(model.state_dict().items(), v["resnet"].state_dict().items(),
                                strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=key)
    _same_checkpoints(tmp_path, "params.ckpt", rtol=1e-5, atol=1e-6, dtype="float32")
    # the published lines, in each library: the same errors
    for lib, g in ((tt, v), (torch, w)):
        monkeypatch.chdir(tmp_path / lib.__name__)
        with pytest.raises(AttributeError, match="_SingleProcessDataLoaderIter' object has no "
                                                 "attribute 'next'"):
            g["data_iter"].next()
        with pytest.raises(ValueError, match=r"^num_samples should be a positive integer "
                                             r"value, but got num_samples=0$"):
            lib.utils.data.DataLoader(dataset=g["custom_dataset"], batch_size=64, shuffle=True)
        with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
            lib.load("model.ckpt")


def test_linear_regression(tmp_path, monkeypatch, capsys):
    """``nn.Linear(1, 1)`` fitted by SGD to fifteen float32 points from NumPy
    (``torch.from_numpy`` each epoch), the fitted line plotted and the state dict saved."""
    runs = run_both("yunjey_linear_regression.py", tmp_path, monkeypatch, capsys)
    ours, v, w = _compare(runs, rtol=1e-5, atol=1e-6)
    losses = _steps(r"Loss: ([\d.]+)", ours)
    assert len(losses) == 12 and all(b < a for a, b in zip(losses, losses[1:])), losses
    _same_plots(runs["tinytrain"][2], runs["torch"][2], rtol=1e-5, atol=1e-6)
    assert [c[0] for c in runs["tinytrain"][2]] == ["plot", "plot", "legend", "show"]
    assert v["predicted"].dtype == np.float32 and v["predicted"].shape == (15, 1)
    _same_checkpoints(tmp_path, "model.ckpt", rtol=1e-5, atol=1e-6, dtype="float32")


def test_logistic_regression(tmp_path, monkeypatch, capsys, shim):
    """``nn.Linear(784, 10)`` with CrossEntropyLoss and SGD; the accuracy is ``100 * correct /
    total`` of a 0-d tensor ``correct`` (``correct += (predicted == labels).sum()``), printed
    by ``'{}'.format``: ``16.0`` as PyTorch's (a 0-d tensor formats as its number)."""
    runs = run_both("yunjey_logistic_regression.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    ours, v, w = _compare(runs)
    assert len(_steps(r"Step \[\d+/13\], Loss: ([\d.]+)", ours)) == 6
    assert re.search(r"test images: \d+\.\d+ %$", ours.strip())
    correct = v["correct"]
    assert type(correct) is tt.Tensor and correct.dtype == tt.int64 and correct.ndim == 0
    assert correct.item() == w["correct"].item() and v["total"] == 500
    _same_checkpoints(tmp_path, "model.ckpt")


def test_feedforward_neural_network(tmp_path, monkeypatch, capsys, shim):
    """A module with ``fc1``, ``nn.ReLU()``, ``fc2`` moved ``.to(device)``, Adam; it learns
    mini MNIST in two epochs of 13 steps."""
    runs = run_both("yunjey_feedforward_neural_network.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    ours, v, w = _compare(runs)
    losses = _steps(r"Loss: ([\d.]+)", ours)
    assert len(losses) == 6 and losses[-1] < losses[0] - 1, losses
    (accuracy,) = _steps(r"test images: ([\d.]+) %", ours)
    assert accuracy > 70, ours  # 10% is chance
    _same_checkpoints(tmp_path, "model.ckpt")


# ------------------------------------------------------------------ 02-intermediate


def test_convolutional_neural_network(tmp_path, monkeypatch, capsys, shim):
    """Two Conv2d + BatchNorm2d + ReLU + MaxPool2d blocks, ``out.reshape(out.size(0), -1)``,
    Adam, then ``model.eval()`` (the running statistics) for the test: PyTorch's losses,
    accuracy and checkpoint, running means and ``num_batches_tracked`` included."""
    monkeypatch.setattr(shim, "MNIST_SIZES", {True: 200, False: 100})
    runs = run_both("yunjey_convolutional_neural_network.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    ours, v, w = _compare(runs)
    assert len(_steps(r"Step \[\d/2\], Loss: ([\d.]+)", ours)) == 2
    # a convolution's bias right before BatchNorm has a gradient of rounding noise only (the
    # normalisation takes the mean out), which Adam's step, g / (sqrt(v) + eps), magnifies:
    # the two libraries' biases (so the running means, which include them) differ by up to
    # ~1e-7 there; everything else agrees to 1e-9
    state = _same_checkpoints(tmp_path, "model.ckpt", noise=(
        "layer1.0.bias", "layer2.0.bias", "layer1.1.running_mean", "layer2.1.running_mean"))
    assert state["layer1.1.num_batches_tracked"].item() == 2 and not v["model"].training


def test_deep_residual_network(tmp_path, monkeypatch, capsys, shim):
    """The CIFAR ResNet: ``conv3x3`` without bias, ResidualBlocks with ``nn.ReLU(inplace=True)``
    and ``out += residual`` (a downsampling ``nn.Sequential`` where the shape changes),
    AvgPool2d(8), the augmentation of Pad / RandomHorizontalFlip / RandomCrop, Adam, and
    ``update_lr`` writing ``param_group['lr']`` after each epoch."""
    monkeypatch.setattr(shim, "CIFAR_SIZES", {True: 10, False: 10})
    runs = run_both("yunjey_deep_residual_network.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    ours, v, w = _compare(runs)
    assert len(_steps(r"Step \[\d/1\] Loss: ([\d.]+)", ours)) == 2
    assert v["curr_lr"] == w["curr_lr"] == pytest.approx(0.001 / 9)
    assert v["optimizer"].param_groups[0]["lr"] == v["curr_lr"]
    state = _same_checkpoints(tmp_path, "resnet.ckpt")
    assert "layer2.0.downsample.0.weight" in state and "layer1.0.downsample.0.weight" not in state


@pytest.mark.parametrize("name", ["yunjey_recurrent_neural_network.py",
                                  "yunjey_bidirectional_recurrent_neural_network.py"])
def test_recurrent_neural_networks(name, tmp_path, monkeypatch, capsys, shim):
    """Two-layer LSTMs (one way, then both ways) with ``batch_first=True`` that read an MNIST
    digit row by row from zero ``(h0, c0)`` moved ``.to(device)``; the last step's
    ``out[:, -1, :]`` into a Linear; Adam."""
    monkeypatch.setattr(shim, "MNIST_SIZES", {True: 100, False: 100})
    runs = run_both(name, tmp_path, monkeypatch, capsys, dtype="float64")
    ours, v, w = _compare(runs)
    assert len(_steps(r"Step \[\d/2\], Loss: ([\d.]+)", ours)) == 4
    state = _same_checkpoints(tmp_path, "model.ckpt")
    both = "bidirectional" in name
    assert ("lstm.weight_hh_l1_reverse" in state) == both
    assert state["fc.weight"].shape == (10, 64 if both else 32)


def penn_like(lines: int = 220) -> bytes:
    """A made-up ``data/train.txt`` in the Penn Treebank's form (a sentence a line, words
    between spaces): sentences of a small grammar."""
    rng = np.random.default_rng(4)
    det, adj = ["the", "a", "every"], ["red", "small", "old", "quick"]
    noun = ["cat", "dog", "bird", "fox", "mat", "tree"]
    verb, prep = ["sat", "ran", "slept", "looked"], ["on", "under", "near"]
    out = []
    for _ in range(lines):
        words = [rng.choice(det)] + ([rng.choice(adj)] if rng.random() < 0.4 else [])
        words += [rng.choice(noun), rng.choice(verb), rng.choice(prep), rng.choice(det),
                  rng.choice(noun)]
        out.append(" " + " ".join(words) + " ")
    return ("\n".join(out) + "\n").encode()


def test_language_model(tmp_path, monkeypatch, capsys):
    """data_utils' Corpus: ``torch.LongTensor(tokens)`` filled one id at a time, cut and
    ``view(batch_size, -1)``; the RNNLM (Embedding, LSTM, Linear on ``out.reshape(...)``)
    trained by truncated backpropagation (``detach`` of the states, a *list* given back as
    the LSTM's ``hx``), ``clip_grad_norm_``, perplexity by ``np.exp(loss.item())``; then 200
    words sampled by ``torch.multinomial(output.exp(), 1).item()`` and ``input.fill_(word_id)``
    into sample.txt: the same text as PyTorch's."""
    files = {"data/train.txt": penn_like(),
             "data_utils.py": tutorial_module("yunjey_data_utils.py")}
    runs = run_both("yunjey_language_model.py", tmp_path, monkeypatch, capsys, files=files,
                    dtype="float64")
    ours, v, w = _compare(runs)
    losses = _steps(r"Loss: ([\d.]+)", ours)
    assert len(losses) == 4 and losses[-1] < losses[0], losses
    assert ours.count("Sampled [") == 2
    ids = v["ids"]
    assert ids.dtype == tt.int64 and ids.shape == (20, ids.numel() // 20) == tuple(w["ids"].shape)
    np.testing.assert_array_equal(ids.numpy(), w["ids"].numpy())
    assert v["vocab_size"] == w["vocab_size"] == 21  # the grammar's 20 words and <eos>
    text = [(tmp_path / lib / "sample.txt").read_text() for lib in ("tinytrain", "torch")]
    assert text[0] == text[1] and len(text[0].split()) > 150
    _same_checkpoints(tmp_path, "model.ckpt")


# ------------------------------------------------------------------ 03-advanced


def test_generative_adversarial_network(tmp_path, monkeypatch, capsys, shim):
    """MLP discriminator (LeakyReLU, Sigmoid) and generator (Tanh) on images normalised to
    [-1, 1], BCELoss against ``torch.ones`` / ``torch.zeros`` labels, two Adams and
    ``reset_grad``, ``images.reshape(batch_size, -1)``; the real and generated images saved
    through ``denorm`` (``clamp(0, 1)``) each epoch, and both checkpoints."""
    monkeypatch.setattr(shim, "MNIST_SIZES", {True: 300, False: 100})
    runs = run_both("yunjey_generative_adversarial_network.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    ours, v, w = _compare(runs)
    d_losses = _steps(r"d_loss: ([\d.]+)", ours)
    assert len(d_losses) == 6 and d_losses[-1] < d_losses[0] - 0.2, ours  # D learns first
    real, fake1, fake2 = _saved_images(shim, ["samples/real_images.png",
                                              "samples/fake_images-1.png",
                                              "samples/fake_images-2.png"])
    assert real.shape == fake1.shape == (100, 1, 28, 28)
    assert 0 <= real.min() and real.max() <= 1 and real.max() > 0.99  # denormalised digits
    for name in ("G.ckpt", "D.ckpt"):
        _same_checkpoints(tmp_path, name)


def test_variational_autoencoder(tmp_path, monkeypatch, capsys, shim):
    """The VAE: ``encode`` to ``mu, log_var``, ``reparameterize`` by ``torch.randn_like``
    (replayed), ``F.sigmoid`` decoder, ``F.binary_cross_entropy(..., size_average=False)``
    (PyTorch's deprecation warning, in both runs) plus the KL term; sampled and
    reconstructed images (``torch.cat(..., dim=3)``) saved each epoch."""
    monkeypatch.setattr(shim, "MNIST_SIZES", {True: 300, False: 100})
    runs = run_both("yunjey_variational_autoencoder.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    ours, v, w = _compare(runs)
    reconst = _steps(r"Reconst Loss: ([\d.]+)", ours)
    assert len(reconst) == 6 and reconst[3] < reconst[0], reconst  # the full batches: lower
    sampled, both = _saved_images(shim, ["samples/sampled-1.png", "samples/reconst-1.png",
                                         "samples/sampled-2.png", "samples/reconst-2.png"])[:2]
    assert sampled.shape == (128, 1, 28, 28) and both.shape == (44, 1, 28, 56)  # 300 - 256


def test_the_deprecated_size_average_warns_as_pytorch():
    """(What the VAE's ``size_average=False`` shows: PyTorch's warning, in both.)"""
    for lib in (tt, torch):
        x = lib.full((4,), 0.5)
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated, "
                                             "please use reduction='sum' instead."):
            loss = lib.nn.functional.binary_cross_entropy(x, lib.ones(4), size_average=False)
        assert loss.item() == pytest.approx(4 * np.log(2))


# ------------------------------------------------------------------ what porting found


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
def test_save_pickles_a_model_of_a_module_named_like_torch(lib, tmp_path, monkeypatch):
    """A whole model whose class lives in a module named ``torch_utils`` (as many
    repositories have): saved and loaded with ``weights_only=False``. tinytrain took the
    "torch" prefix for PyTorch's own objects and refused it."""
    module = types.ModuleType("torch_utils")
    monkeypatch.setitem(sys.modules, "torch_utils", module)

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(3, 2)

    Net.__module__, Net.__qualname__ = "torch_utils", "Net"
    module.Net = Net
    net = Net()
    lib.save(net, tmp_path / "net.pt")
    loaded = lib.load(tmp_path / "net.pt", weights_only=False)
    assert type(loaded) is Net and loaded is not net
    np.testing.assert_array_equal(loaded.fc.weight.detach().numpy(), net.fc.weight.detach().numpy())
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        lib.load(tmp_path / "net.pt")


def test_save_still_refuses_pytorch_objects(tmp_path):
    with pytest.raises(TypeError, match="a PyTorch tensor or object"):
        tt.save({"w": torch.zeros(2)}, tmp_path / "x.pt")


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
def test_a_random_sampler_of_an_empty_data_set_raises(lib):
    """PyTorch's RandomSampler refuses an empty data source when it is made, so a shuffling
    DataLoader of an empty data set raises (yunjey's CustomDataset of length 0); without
    shuffling it is an empty epoch; random_split of an empty data set still works."""
    message = r"^num_samples should be a positive integer value, but got num_samples=0$"
    with pytest.raises(ValueError, match=message):
        lib.utils.data.RandomSampler([])
    with pytest.raises(ValueError, match=message):
        lib.utils.data.DataLoader([], batch_size=4, shuffle=True)
    with pytest.raises(ValueError, match=message):
        lib.utils.data.RandomSampler([1, 2], num_samples=0)
    loader = lib.utils.data.DataLoader([], batch_size=4)
    assert len(loader) == 0 and list(loader) == []
    (empty,) = lib.utils.data.random_split([], [0])
    assert len(empty) == 0


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
def test_a_dataloader_iterator_has_len_and_no_next_method(lib):
    """``iter(loader)``: ``len()`` is the epoch's number of batches (also after some were
    taken), ``iter(it) is it``, and ``it.next()`` is gone (PyTorch 1.13 removed it)."""
    data = lib.utils.data.TensorDataset(lib.arange(10.0), lib.arange(10))
    loader = lib.utils.data.DataLoader(data, batch_size=4, shuffle=True)
    it = iter(loader)
    assert len(it) == 3 and iter(it) is it
    x, y = next(it)
    assert tuple(x.shape) == (4,) and len(it) == 3
    assert sum(1 for _ in it) == 2
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(AttributeError, match="object has no attribute 'next'"):
        it.next()
    assert len(iter(lib.utils.data.DataLoader(data, batch_size=4, drop_last=True))) == 2


def _both(fn):
    """``fn(tt)`` and ``fn(torch)``: each result, or the exception each raised."""
    out = []
    for lib in (tt, torch):
        try:
            out.append(fn(lib))
        except Exception as error:  # noqa: BLE001 (compared below)
            out.append(error)
    return out


@pytest.mark.parametrize("fn", [
    lambda L: L.zeros(2).fill_(L.tensor([3.0])),  # a one-element 1-D tensor
    lambda L: L.zeros(2).fill_(L.ones(2)),
    lambda L: L.multinomial(L.ones(3), 0),
    lambda L: L.multinomial(L.ones(2, 3), 0, replacement=True),
    lambda L: L.nn.functional.binary_cross_entropy(L.full((4,), 1.5), L.ones(4)),
    lambda L: L.nn.functional.binary_cross_entropy(L.full((4,), 0.5), L.full((4,), 2.0)),
    lambda L: L.nn.Linear(2, 2).weight.__setattr__("requires_grad", 1),
    lambda L: L.device("gpu"),
    lambda L: L.zeros(2).to("gpu"),
], ids=["fill_-1d", "fill_-2", "multinomial-0", "multinomial-0-rows", "bce-input",
        "bce-target", "requires_grad-int", "device-gpu", "to-gpu"])
def test_errors_of_pytorch_type(fn):
    """What PyTorch refuses with a RuntimeError, tinytrain refuses with one (also the
    ValueError / TypeError it raised before, where it did)."""
    ours, theirs = _both(fn)
    assert type(theirs) is RuntimeError, theirs
    assert isinstance(ours, RuntimeError), ours


@pytest.mark.parametrize("fn", [
    lambda L: L.randn(2, dtype=L.int64), lambda L: L.rand(2, dtype=L.int32),
    lambda L: L.randn_like(L.zeros(2, dtype=L.int64)), lambda L: L.randn(2, dtype=L.bool),
    lambda L: L.zeros(2, dtype=L.int64).uniform_(), lambda L: L.zeros(2, dtype=L.int64).normal_(),
    lambda L: L.nn.init.uniform_(L.zeros(2, dtype=L.int64)),
    lambda L: L.nn.init.kaiming_uniform_(L.zeros(2, 2, dtype=L.int64)),
    lambda L: L.nn.init.xavier_normal_(L.zeros(2, 2, dtype=L.int64)),
    lambda L: L.nn.init.trunc_normal_(L.zeros(2, 2, dtype=L.int64)),
])
def test_random_fillers_of_integer_tensors_raise_not_implemented(fn):
    """PyTorch has no kernel that draws real numbers into an integer tensor: its
    NotImplementedError (``"normal_kernel_cpu" not implemented for 'Long'``). tinytrain
    raised a TypeError-like DTypeError, and ``uniform_`` filled the tensor with zeros."""
    ours, theirs = _both(fn)
    assert type(theirs) is NotImplementedError, theirs
    assert isinstance(ours, NotImplementedError) and isinstance(ours, TypeError), ours


def test_load_state_dict_result_prints_as_pytorch():
    for lib in (tt, torch):
        result = lib.nn.Linear(2, 2).load_state_dict(
            {"weight": lib.zeros(2, 2), "x": lib.zeros(1)}, strict=False)
        assert repr(result) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['x'])"
        assert result.missing_keys == ["bias"] and type(result).__name__ == "_IncompatibleKeys"
        assert str(lib.nn.Linear(2, 2).load_state_dict(lib.nn.Linear(2, 2).state_dict())) == (
            "<All keys matched successfully>")


@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_loss_size_mismatch_warns_as_pytorch(loss):
    """A target that broadcasts against the input: PyTorch's warning (sizes as tuples)."""
    texts = []
    for lib in (tt, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(lib.nn.functional, loss)(lib.zeros(4, 1), lib.ones(4))
        (warning,) = caught
        assert warning.category is UserWarning and warning.filename == __file__
        texts.append(re.sub(r"torch\.Size\(\[([^\]]*)\]\)", lambda m: str(tuple(
            int(d) for d in m.group(1).split(",") if d.strip())), str(warning.message)))
    assert texts[0] == texts[1], texts


def test_a_device_with_an_index_prints_it():
    """``print(torch.device('cuda:0'))`` shows ``cuda:0`` (it showed ``cuda``); the device
    still is the string ``"cuda"`` inside tinytrain, and one without an index prints its
    type."""
    for spec in ("cuda:0", ("cuda", 1), "cuda", "cpu"):
        ours, theirs = ((L.device(*spec) if isinstance(spec, tuple) else L.device(spec))
                        for L in (tt, torch))
        assert str(ours) == str(theirs) == f"{ours}" == f"{theirs}" == format(ours, "")
        assert repr(ours) == repr(theirs) and ours.type == theirs.type
        assert ours.index == theirs.index == pickle.loads(pickle.dumps(ours)).index
    assert tt.device("cuda:1") == "cuda" and tt.device("cuda:1").type == "cuda"
