"""Three of PyTorch's tutorials, ported by their imports, run with tinytrain and with PyTorch on
the same data and the same random numbers (``Draws`` of tests/test_ports9.py), and what
porting them found.

Programs (whole scripts in ``tests/tutorials/``, changed lines marked ``# tinytrain:``): the
"Pruning Tutorial" (``torch.nn.utils.prune``, which tinytrain did not have: now
``tinytrain.nn.utils.prune``, tested on its own in tests/test_prune.py), "Adversarial Example
Generation" (FGSM on a LeNet: input gradients, ``sign``, ``clamp``) and the "Knowledge
Distillation Tutorial" (teacher and student CNNs; soft targets at a temperature, a cosine
embedding loss on hidden representations, a regressor on feature maps).
"""

from __future__ import annotations

import ast
import copy
import io
import pickle
import re
import sys

import numpy as np
import pytest
import test_ports9
import torch
import torch.nn.utils.prune  # noqa: F401 (torch.nn.utils.prune, imported on demand there)
from test_ports9 import _diff, _documented, _same_but_for_rounding, _same_plots, numbers, run_both
from test_tutorials import TUTORIALS

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")


# ------------------------------------------------------------------ pruning


def _prune_draws_replayed_too(monkeypatch) -> None:
    """``Draws`` replays the program's own random calls, not a library's internal ones;
    ``random_unstructured`` draws inside ``nn.utils.prune`` (``rand_like``), and those draws
    are what makes the two runs' masks comparable: count that module as the program."""
    def from_the_program(lib, real, wrapped):
        def call(*args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            inside = (caller.split(".")[0] == lib.__name__
                      and caller != f"{lib.__name__}.nn.utils.prune")
            return (real if inside else wrapped)(*args, **kwargs)
        return call
    monkeypatch.setattr(test_ports9, "_from_the_program", from_the_program)


def _hooks_alike(text: str) -> str:
    """The outputs with the pruning hooks' module and address and the hooks' ids (a
    process-wide counter in both libraries, so it depends on what ran before) made alike."""
    text = re.sub(r"<(?:torch|tinytrain)\.nn\.utils\.prune\.(\w+) object at 0x[\da-f]+>",
                  r"<prune.\1>", text)
    return re.sub(r"\((\d+), <prune\.", "(ID, <prune.", text)


def test_pruning_tutorial(tmp_path, monkeypatch, capsys):
    """``prune.random_unstructured`` (its ``rand_like`` draws replayed), ``l1_unstructured``
    of a bias by count, ``ln_structured(n=2, dim=0)`` on top (a PruningContainer, iterated),
    ``weight_orig`` / ``weight_mask`` in ``named_parameters`` / ``named_buffers`` /
    ``state_dict().keys()``, ``module._forward_pre_hooks``, ``prune.remove``, pruning every
    layer by type, ``global_unstructured`` with ``L1Unstructured`` and the sparsities, and a
    ``BasePruningMethod`` subclass (``mask.flatten()[::2] = 0``). float64: PyTorch's printout
    to the last digit, the same masks and weights."""
    _prune_draws_replayed_too(monkeypatch)
    runs = run_both("pruning_tutorial.py", tmp_path, monkeypatch, capsys, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    ours, theirs = _hooks_alike(_documented(ours)), _hooks_alike(_documented(theirs))
    assert ours == theirs, _diff(ours, theirs)
    assert "OrderedDict([(ID, <prune.RandomUnstructured>)])" in ours
    assert "[<prune.RandomUnstructured>, <prune.LnStructured>]" in ours
    assert ("odict_keys(['conv1.weight_orig', 'conv1.bias_orig', 'conv1.weight_mask', "
            "'conv1.bias_mask', 'conv2.weight', 'conv2.bias'") in ours
    assert "Global sparsity: 20.00%" in ours
    assert "tensor([0., 1., 0., 1., 0., 1., 0., 1., 0., 1.])" in ours  # foobar's bias_mask
    # the pruned models are PyTorch's: parameters, buffers and hooks alike
    for ours_model, theirs_model in ((v["new_model"], w["new_model"]), (v["model"], w["model"])):
        ours_state, theirs_state = ours_model.state_dict(), theirs_model.state_dict()
        assert list(ours_state) == list(theirs_state)
        for key, t in ours_state.items():
            np.testing.assert_array_equal(t.numpy(), theirs_state[key].numpy(), err_msg=key)
        assert tt.nn.utils.prune.is_pruned(ours_model)
    sparsity = {name: float(x) for name, x in re.findall(r"Sparsity in (\S+): ([\d.]+)%", ours)}
    assert len(set(sparsity.values())) > 1  # global: each layer its own share of the 20%
    fc3 = v["module"]  # (the loop's last module: new_model.fc3, its weight pruned)
    assert fc3 is v["new_model"].fc3
    assert [k for k, _ in fc3.named_parameters()] == ["bias", "weight_orig"]
    x = np.random.default_rng(0).standard_normal((2, 1, 28, 28))
    with tt.no_grad(), torch.no_grad():  # a pruned model's forward: the hooks apply the masks
        np.testing.assert_allclose(v["new_model"](tt.tensor(x)).numpy(),
                                   w["new_model"](torch.tensor(x)).numpy(), rtol=1e-12,
                                   atol=1e-14)


# ------------------------------------------------------------------ adversarial examples


def _program_class(name: str, cls: str, namespace: dict) -> type:
    """Class ``cls`` of tutorial ``name``, defined in ``namespace`` (its imports)."""
    tree = ast.parse((TUTORIALS / name).read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    exec(compile(ast.Module([node], []), name, "exec"), namespace)
    return namespace[cls]


@pytest.fixture(scope="module")
def lenet_mnist_model() -> dict:
    """The FGSM tutorial's "pretrained" LeNet (its download is not available): the program's
    own ``Net``, trained by tinytrain for two epochs with Adam on the shim's 1280 MNIST
    digits; ``{lib: the state_dict saved by lib.save, as bytes}``."""
    sys.path.insert(0, str(TUTORIALS))
    try:
        import torchvision_shim as tv
    finally:
        sys.path.remove(str(TUTORIALS))
    Net = _program_class("fgsm_tutorial.py", "Net", {"nn": tt.nn, "F": tt.nn.functional})
    tt.manual_seed(1)
    model = Net()
    data = tv.mnist(".", train=True, transform=lambda image: tt.tensor(image))
    loader = tt.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    optimizer = tt.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            tt.nn.functional.nll_loss(model(x), y).backward()
            optimizer.step()
    files = {}
    for lib in (tt, torch):
        state = {k: (t if lib is tt else torch.from_numpy(t.numpy().copy()))
                 for k, t in model.state_dict().items()}
        buffer = io.BytesIO()
        lib.save(state, buffer)
        files[lib.__name__] = buffer.getvalue()
    return files


def test_fgsm_tutorial(tmp_path, monkeypatch, capsys, lenet_mnist_model):
    """``data.requires_grad = True`` on a DataLoader's batch, ``model.zero_grad()``,
    ``data.grad.data.sign()``, ``image + epsilon*sign_data_grad``, ``torch.clamp(.., 0, 1)``,
    ``output.max(1, keepdim=True)[1]``, ``torch.load(path, map_location='cpu')`` of the
    trained LeNet, seven epsilons over a shuffled test loader of batch 1 (its permutations
    replayed), and the plots. 40 test digits (of 500: each is two forwards and a backward,
    seven times); float32 (the data's dtype). The same accuracies, adversarial examples and
    plots as PyTorch's, and the attack works."""
    monkeypatch.syspath_prepend(str(TUTORIALS))
    import torchvision_shim

    monkeypatch.setitem(torchvision_shim.MNIST_SIZES, False, 40)
    files = {"lenet_mnist_model.pth": lambda lib: lenet_mnist_model[lib]}
    runs = run_both("fgsm_tutorial.py", tmp_path, monkeypatch, capsys, files=files)
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    assert ours == theirs, _diff(ours, theirs)
    assert ours.startswith("CUDA Available:  False\n")
    accuracies = v["accuracies"]
    assert accuracies == w["accuracies"] and len(accuracies) == 7
    assert accuracies[0] > 0.7, accuracies  # the trained LeNet: 10% is chance
    assert accuracies[-1] < accuracies[0] - 0.3, accuracies  # the attack works
    assert all(b <= a for a, b in zip(accuracies, accuracies[1:])), accuracies
    for ours_eps, theirs_eps in zip(v["examples"], w["examples"], strict=True):
        for (init, final, ex), (their_init, their_final, their_ex) in zip(
                ours_eps, theirs_eps, strict=True):
            assert (init, final) == (their_init, their_final)
            assert ex.shape == (28, 28) and ex.dtype == np.float32
            np.testing.assert_allclose(ex, their_ex, rtol=1e-6, atol=1e-7)
    for ex in v["examples"][1:]:  # clamped to [0, 1]
        assert all(0 <= e.min() and e.max() <= 1 for _, _, e in ex)
    _same_plots(our_plots, their_plots, rtol=1e-6, atol=1e-7)
    assert [c[0] for c in our_plots].count("imshow") == sum(map(len, v["examples"]))


# ------------------------------------------------------------------ knowledge distillation


@pytest.mark.slow  # (the teacher's 128-channel convolutions, in both libraries)
def test_knowledge_distillation_tutorial(tmp_path, monkeypatch, capsys):
    """A teacher CNN and student CNNs (``torch.manual_seed(42)`` before each: the same
    initial weights, checked by ``torch.norm(...).item()``), Adam, ``nn.Dropout`` (its masks
    replayed), the soft-target loss ``torch.sum(soft_targets * (soft_targets.log() -
    soft_prob)) / soft_prob.size()[0] * (T**2)`` at T = 2, ``nn.CosineEmbeddingLoss`` on
    the hidden representations (the teacher's through ``F.avg_pool1d`` of a 2-d tensor),
    ``load_state_dict`` of the teacher into the modified classes, a regressor conv and
    ``nn.MSELoss`` on feature maps, ``torch.max(outputs.data, 1)``. On the shim's made-up
    CIFAR-10 (16 training and 8 test images: the teacher's 128-channel convolutions at
    32 x 32 are the cost), two epochs instead of ten; float32 (the data's dtype): PyTorch's
    printout but for the last digits of its float32 losses."""
    monkeypatch.syspath_prepend(str(TUTORIALS))
    import torchvision_shim

    monkeypatch.setitem(torchvision_shim.CIFAR_SIZES, True, 16)
    monkeypatch.setitem(torchvision_shim.CIFAR_SIZES, False, 8)
    # PyTorch's DataLoader starts its two worker processes (num_workers=2) for every epoch of
    # every loop: seconds of fork and start-up here, more than its convolutions. In process,
    # as tinytrain's DataLoader runs, the batches are the same.
    real_init = torch.utils.data.DataLoader.__init__

    def in_process(self, *args, num_workers=0, **kwargs):
        real_init(self, *args, **kwargs)
    monkeypatch.setattr(torch.utils.data.DataLoader, "__init__", in_process)
    runs = run_both("knowledge_distillation_tutorial.py", tmp_path, monkeypatch, capsys)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=2e-5)
    assert "DeepNN parameters: 1,186,986\nLightNN parameters: 267,738\n" in ours
    norms = dict(re.findall(r"^Norm of 1st layer(.*): ([\d.]+)$", ours, re.M))
    assert len(set(norms.values())) == 2, norms  # the students alike, the teacher alike
    assert norms[" of nn_light"] == norms[" of new_nn_light"] == norms[""]
    assert norms[" for deep_nn"] == norms[" for modified_deep_nn"]
    for line in ("Student hidden representation shape: (8, 1024)",
                 "Teacher hidden representation shape: (8, 1024)",  # avg_pool1d of 2048
                 "Student's feature extractor output shape:  (8, 16, 8, 8)",
                 "Teacher's feature extractor output shape:  (8, 32, 8, 8)"):
        assert line in ours, line
    epochs = [float(x) for x in re.findall(r"^Epoch \d/2, Loss: ([\d.]+)$", ours, re.M)]
    assert len(epochs) == 10 and all(b < a for a, b in zip(epochs[::2], epochs[1::2])), epochs
    assert 2.2 < epochs[0] < 2.4  # the teacher's first: about ln 10
    assert v["test_accuracy_deep"] == w["test_accuracy_deep"]
    # float32 Adam: its first steps move each weight by about lr * sign(gradient), so a
    # gradient of about 1e-9 whose sign the two libraries' roundings decide moves a few of
    # the Linear layers' weights apart by up to 2 * lr * 1e-2 (8 of the teacher's million
    # were more than 1e-5 apart); the rest agree to about 1e-6
    for name in ("nn_deep", "nn_light", "new_nn_light", "modified_nn_light",
                 "modified_nn_light_reg"):
        state, their_state = v[name].state_dict(), w[name].state_dict()
        assert list(state) == list(their_state)
        for key, t in state.items():
            apart = np.abs(t.numpy() - their_state[key].numpy())
            assert apart.max() < 1e-4 and np.count_nonzero(apart > 1e-5) <= 16, (name, key)


# ------------------------------------------------------------------ what porting found


@pytest.mark.parametrize(("p", "dim"), [
    ("fro", None), ("fro", 1), ("fro", (1, 2)), ("fro", [0, 2]), ("fro", [0, 1, 2]),
    ("nuc", None), ("nuc", [1]), ("abc", (0, 1)), ("abc", None)])
def test_norm_with_a_string_p_is_a_matrix_norm_beyond_two_dims_as_torch(p, dim):
    """``ln_structured(n="fro")`` of a conv weight: ``torch.norm(t, "fro", dim=[0, 2, 3])``
    is a matrix norm, which needs exactly two dims (RuntimeError), where tinytrain took the
    2-norm of the three; ``"nuc"`` and other strings go the same way (tinytrain has no
    nuclear norm: NotImplementedError, a RuntimeError, where PyTorch has one)."""
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    try:
        theirs = torch.norm(torch.tensor(x), p=p, dim=dim).numpy()
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=str(e).split(".")[0].split(":")[0]):
            tt.norm(tt.tensor(x), p=p, dim=dim)
        return
    if p == "nuc":  # (PyTorch's SVD)
        with pytest.raises(NotImplementedError, match="singular value decomposition"):
            tt.norm(tt.tensor(x), p=p, dim=dim)
        return
    np.testing.assert_allclose(tt.norm(tt.tensor(x), p=p, dim=dim).numpy(), theirs, rtol=1e-12)


def test_a_computed_tensor_pickles_as_a_leaf_and_refuses_deepcopy_as_torch():
    """A pruned module holds a computed tensor (``weight = mask * weight_orig``):
    ``copy.deepcopy`` of it raised nothing in tinytrain and copied the graph, where PyTorch
    raises RuntimeError; pickled (``save(model)``, ``copy.copy``) it kept its graph, where
    PyTorch's loads as a leaf with its ``requires_grad``. A leaf and a graph-free product
    copy as before."""
    for lib in (tt, torch):
        x = lib.ones(2, 3, requires_grad=True)
        for y in (x * 2, (x * 2)[0]):
            with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the "
                                                   "user \\(graph leaves\\) support the deepcopy"):
                copy.deepcopy(y)
            for z in (pickle.loads(pickle.dumps(y)), copy.copy(y)):
                assert z.is_leaf and z.grad_fn is None and z.requires_grad
                np.testing.assert_array_equal(z.detach().numpy(), y.detach().numpy())
                z.sum().backward()  # a leaf of its own now
                assert z.grad is not None and x.grad is None
        with lib.no_grad():
            product = x * 2
        assert not copy.deepcopy(product).requires_grad
        leaf = copy.deepcopy(x)
        assert leaf.is_leaf and leaf.requires_grad and leaf is not x


def test_a_pruned_model_copies_and_saves_as_torch(tmp_path):
    """``copy.deepcopy`` of a pruned model raises as PyTorch's (copy before pruning or after
    ``prune.remove``); the whole model saved and loaded (pickled) keeps its pruning: the same
    outputs, ``weight`` a leaf until the hook computes it at the next forward."""
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    outputs = []
    for lib in (tt, torch):
        pruning = lib.nn.utils.prune
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.ReLU(), lib.nn.Linear(3, 2))
        pruning.l1_unstructured(model[0], "weight", amount=5)
        with pytest.raises(RuntimeError, match="deepcopy protocol"):
            copy.deepcopy(model)
        lib.save(model, tmp_path / f"{lib.__name__}.pt")
        loaded = lib.load(tmp_path / f"{lib.__name__}.pt", weights_only=False)
        assert loaded[0].weight.is_leaf and pruning.is_pruned(loaded)
        with lib.no_grad():
            np.testing.assert_array_equal(loaded(lib.tensor(x)).numpy(),
                                          model(lib.tensor(x)).numpy())
        pruning.remove(model[0], "weight")
        twin = copy.deepcopy(model)
        assert [k for k, _ in twin.named_parameters()] == ["0.bias", "0.weight", "2.weight",
                                                           "2.bias"]
        outputs.append(int((twin[0].weight == 0).sum()))
    assert outputs == [5, 5]
