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

import re
import sys

import numpy as np
import pytest
import test_ports9
import torch
from test_ports9 import _diff, _documented, run_both

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
    conv1 = v["module"]  # (the loop's last module: new_model.fc3)
    assert [k for k, _ in conv1.named_parameters()] == ["bias", "weight_orig"]
    x = np.random.default_rng(0).standard_normal((2, 1, 28, 28))
    with tt.no_grad(), torch.no_grad():  # a pruned model's forward: the hooks apply the masks
        np.testing.assert_allclose(v["new_model"](tt.tensor(x)).numpy(),
                                   w["new_model"](torch.tensor(x)).numpy(), rtol=1e-12,
                                   atol=1e-14)


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
