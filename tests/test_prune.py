"""``tinytrain.nn.utils.prune`` against PyTorch's ``torch.nn.utils.prune``.

Every test runs the same steps on a tinytrain model and on a PyTorch model with the same
weights; the random methods' draws (``rand_like``, ``rand``) are tinytrain's, replayed in
PyTorch's run. After each step both must have the same masks and pruned tensors, the same
parameter, buffer and ``state_dict`` names in the same order, the same hooks (by class and
parameter name), and raise the same error types. Weights are float64 normals: no ties among
magnitudes or norms (where they tie, PyTorch's ``topk`` order is its own; see the module).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as torch_prune

import tinytrain as tt
import tinytrain.nn.utils.prune as prune

pytestmark = pytest.mark.usefixtures("torch_single_thread")

LIBS = {"tinytrain": (tt, prune), "torch": (torch, torch_prune)}


class Draws:
    """tinytrain's ``rand`` / ``rand_like`` values, recorded in order and then given, in the
    same order, to PyTorch's same calls (made for real: their shapes and dtypes are compared)."""

    def __init__(self) -> None:
        self.values: list[tuple[str, np.ndarray]] = []
        self.replayed = 0

    def patch(self, monkeypatch, lib) -> None:
        for name in ("rand", "rand_like"):
            real = getattr(lib, name)
            wrap = self._record if lib is tt else self._replay
            monkeypatch.setattr(lib, name, wrap(name, real))

    def _record(self, name, real):
        def recording(*args, **kwargs):
            out = real(*args, **kwargs)
            self.values.append((name, np.array(out.numpy())))
            return out
        return recording

    def _replay(self, name, real):
        def replaying(*args, **kwargs):
            out = real(*args, **kwargs)
            was, value = self.values[self.replayed]
            self.replayed += 1
            assert was == name and tuple(out.shape) == value.shape, (name, was)
            assert str(out.dtype) == f"torch.{value.dtype}", (out.dtype, value.dtype)
            return torch.from_numpy(value.copy())
        return replaying


def run_both(program, monkeypatch):
    """``program(lib, prune)`` with tinytrain (its draws recorded), then with PyTorch
    (replaying them): ``(ours, theirs)``."""
    draws, results = Draws(), []
    for lib, pruning in LIBS.values():
        with monkeypatch.context() as patches:
            draws.patch(patches, lib)
            results.append(program(lib, pruning))
    assert draws.replayed == len(draws.values)
    return results


def make_model(lib, seed: int = 0):
    """Conv2d(2, 4, 3) -> ReLU -> Flatten -> Linear(64, 5) -> Linear(5, 3), float64, with
    weights from a seeded NumPy generator (the same in both libraries)."""
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 5),
                          nn.Linear(5, 3)).double()
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    return model


def describe(model) -> dict:
    """Everything about a (pruned) model that the two libraries must share."""
    out = {"parameters": [(k, p.detach().numpy().copy()) for k, p in model.named_parameters()],
           "buffers": [(k, b.numpy().copy()) for k, b in model.named_buffers()],
           "state": list(model.state_dict()),
           "hooks": [], "attributes": []}
    for name, m in model.named_modules():
        for hook in m._forward_pre_hooks.values():
            kind = type(hook).__name__
            inner = [type(h).__name__ for h in hook] if kind == "PruningContainer" else []
            out["hooks"].append((name, kind, hook._tensor_name, inner))
            for method in [hook, *(list(hook) if inner else [])]:
                out["attributes"].append((name, type(method).__name__, {
                    k: getattr(method, k) for k in ("amount", "n", "dim") if hasattr(method, k)}))
            pruned = getattr(m, hook._tensor_name)
            out["attributes"].append((name, hook._tensor_name, pruned.detach().numpy().copy(),
                                      type(pruned).__name__, pruned.requires_grad))
    return out


def assert_same(ours: dict, theirs: dict, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Equal (arrays to ``rtol`` and ``atol``)."""
    def same(a, b, where):
        if isinstance(a, np.ndarray):
            assert a.shape == b.shape and a.dtype == b.dtype, where
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=where)
        elif isinstance(a, list | tuple):
            assert len(a) == len(b), (where, a, b)
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{where}[{i}]")
        else:
            assert a == b, (where, a, b)
    for key in ours:
        same(ours[key], theirs[key], key)


def both_pruned(steps, monkeypatch, seed: int = 0):
    """Apply ``steps`` (functions of ``(model, prune)``) to the two libraries' models,
    comparing after each step; returns the two models."""
    def program(lib, pruning):
        model = make_model(lib, seed)
        states = []
        for step in steps:
            step(model, pruning)
            states.append(describe(model))
        return model, states
    (ours, our_states), (theirs, their_states) = run_both(program, monkeypatch)
    for i, (a, b) in enumerate(zip(our_states, their_states, strict=True)):
        try:
            assert_same(a, b)
        except AssertionError as e:
            raise AssertionError(f"after step {i}") from e
    return ours, theirs


# ------------------------------------------------------------------ one method at a time

CONV, FC, FC2 = "0", "3", "4"

ONE_STEP = {
    "random_unstructured 0.3": lambda m, p: p.random_unstructured(m[0], "weight", amount=0.3),
    "random_unstructured 7": lambda m, p: p.random_unstructured(m[3], "weight", amount=7),
    "random_unstructured 0": lambda m, p: p.random_unstructured(m[3], "weight", amount=0),
    "random_unstructured all": lambda m, p: p.random_unstructured(m[3], "bias", amount=1.0),
    "l1_unstructured 0.5": lambda m, p: p.l1_unstructured(m[0], "weight", amount=0.5),
    "l1_unstructured bias 2": lambda m, p: p.l1_unstructured(m[0], "bias", amount=2),
    "l1_unstructured 0.0": lambda m, p: p.l1_unstructured(m[3], "weight", amount=0.0),
    "random_structured dim 0": lambda m, p: p.random_structured(m[0], "weight", 0.5, dim=0),
    "random_structured dim -1": lambda m, p: p.random_structured(m[3], "weight", 10, dim=-1),
    "random_structured dim 2": lambda m, p: p.random_structured(m[0], "weight", 1, dim=2),
    "ln_structured n=2": lambda m, p: p.ln_structured(m[0], "weight", 0.5, n=2, dim=0),
    "ln_structured n=1 dim 1": lambda m, p: p.ln_structured(m[3], "weight", 20, n=1, dim=1),
    "ln_structured n=inf": lambda m, p: p.ln_structured(m[3], "weight", 2, n=math.inf, dim=0),
    "ln_structured n=-inf": lambda m, p: p.ln_structured(m[3], "weight", 2, n=-math.inf, dim=0),
    "ln_structured n=fro": lambda m, p: p.ln_structured(m[3], "weight", 0.25, n="fro", dim=1),
    "ln_structured n=3 dim -1": lambda m, p: p.ln_structured(m[0], "weight", 1, n=3, dim=-1),
    "ln_structured n=0.5": lambda m, p: p.ln_structured(m[4], "weight", 0.4, n=0.5, dim=0),
    "ln_structured 0": lambda m, p: p.ln_structured(m[4], "weight", 0, n=2, dim=0),
    "ln_structured all": lambda m, p: p.ln_structured(m[3], "weight", 1.0, n=1, dim=1),
    "random_structured all": lambda m, p: p.random_structured(m[0], "weight", 4, dim=0),
    "random_structured 0": lambda m, p: p.random_structured(m[0], "weight", 0.0, dim=1),
    "identity": lambda m, p: p.identity(m[4], "bias"),
    "custom_from_mask float": lambda m, p: p.custom_from_mask(
        m[4], "bias", mask=_lib_of(m).tensor([0.0, 1.0, 1.0], dtype=_lib_of(m).float64)),
    "custom_from_mask int": lambda m, p: p.custom_from_mask(
        m[4], "bias", mask=_lib_of(m).tensor([0, 1, 0])),
    "custom_from_mask bool": lambda m, p: p.custom_from_mask(
        m[0], "weight", mask=_lib_of(m).rand(4, 2, 3, 3) > 0.5),
}


def _lib_of(model):
    return tt if type(model).__module__.startswith("tinytrain") else torch


@pytest.mark.parametrize("step", list(ONE_STEP), ids=list(ONE_STEP))
def test_each_method_gives_torch_masks_names_and_hooks(step, monkeypatch):
    """The mask, the pruned tensor (``mask * orig``, a non-leaf), ``weight_orig`` (the same
    Parameter object) and ``weight_mask``, the order of ``named_parameters`` (``bias``,
    ``weight_orig``) and of ``state_dict``, and the hook in ``_forward_pre_hooks``."""
    ours, theirs = both_pruned([ONE_STEP[step]], monkeypatch)
    pruned = [m for m in ours.modules() if m._forward_pre_hooks]
    assert len(pruned) == 1
    (hook,) = pruned[0]._forward_pre_hooks.values()
    name = hook._tensor_name
    m = pruned[0]
    assert name not in m._parameters and m._parameters[name + "_orig"] is not None
    assert isinstance(m._parameters[name + "_orig"], tt.nn.Parameter)
    pruned_tensor = getattr(m, name)
    assert not isinstance(pruned_tensor, tt.nn.Parameter) and pruned_tensor.grad_fn is not None
    mask = getattr(m, name + "_mask")
    assert mask.dtype == tt.float64 and not mask.requires_grad
    assert set(np.unique(mask.numpy())) <= {0.0, 1.0}


def test_random_methods_prune_what_the_amount_says(monkeypatch):
    """Counts: ``round(amount * n)`` of the entries / channels (Python's rounding: 0.5 of 5
    rounds to 2), or the integer given."""
    ours, _ = both_pruned([
        lambda m, p: p.random_unstructured(m[3], "weight", amount=0.25),   # 80 of 320
        lambda m, p: p.random_structured(m[4], "weight", amount=0.5, dim=1),  # 2 of 5 (2.5)
        lambda m, p: p.random_unstructured(m[0], "bias", amount=3),
    ], monkeypatch)
    assert (ours[3].weight_mask == 0).sum().item() == 80
    assert (ours[4].weight_mask.sum(0) == 0).sum().item() == 2
    assert (ours[0].bias_mask == 0).sum().item() == 3


# ------------------------------------------------------------------ iterative pruning

SEQUENCES = {
    "tutorial": [ONE_STEP["random_unstructured 0.3"], ONE_STEP["ln_structured n=2"]],
    "unstructured twice": [lambda m, p: p.l1_unstructured(m[3], "weight", 0.3),
                           lambda m, p: p.l1_unstructured(m[3], "weight", 0.3),
                           lambda m, p: p.random_unstructured(m[3], "weight", 10)],
    "structured then unstructured": [
        lambda m, p: p.ln_structured(m[0], "weight", 2, n=1, dim=0),
        lambda m, p: p.l1_unstructured(m[0], "weight", 0.5),
        lambda m, p: p.random_structured(m[0], "weight", 1, dim=0)],
    "structured on two dims": [
        lambda m, p: p.random_structured(m[3], "weight", 0.4, dim=0),
        lambda m, p: p.ln_structured(m[3], "weight", 0.5, n=2, dim=1),
        lambda m, p: p.ln_structured(m[3], "weight", 1, n=1, dim=-2)],
    "global then custom": [
        lambda m, p: p.l1_unstructured(m[4], "weight", 4),
        lambda m, p: p.custom_from_mask(m[4], "weight", mask=_lib_of(m).ones(3, 5)),
        lambda m, p: p.identity(m[4], "weight")],
    "weights and biases": [
        lambda m, p: p.l1_unstructured(m[3], "bias", 1),
        lambda m, p: p.random_unstructured(m[3], "weight", 0.1),
        lambda m, p: p.l1_unstructured(m[3], "bias", 1),
        lambda m, p: p.ln_structured(m[3], "weight", 1, n=2, dim=0)],
    "importance scores": [
        lambda m, p: p.l1_unstructured(m[4], "weight", 5, importance_scores=_lib_of(m).tensor(
            np.arange(15.0)[::-1].reshape(3, 5).copy())),
        lambda m, p: p.ln_structured(m[4], "weight", 1, n=2, dim=0,
                                     importance_scores=_lib_of(m).tensor(
                                         np.array([[3.0] * 5, [1.0] * 5, [2.0] * 5])))],
}


@pytest.mark.parametrize("steps", list(SEQUENCES), ids=list(SEQUENCES))
def test_pruning_again_acts_on_what_is_left_as_torch(steps, monkeypatch):
    """A parameter pruned again gets one hook, a PruningContainer of its methods in order,
    each new method acting on the entries (unstructured) or channels (structured) that are
    left, the masks combined: PyTorch's masks after every step."""
    ours, theirs = both_pruned(SEQUENCES[steps], monkeypatch)
    for m in ours.modules():
        names = [h._tensor_name for h in m._forward_pre_hooks.values()]
        assert len(names) == len(set(names))  # one hook a parameter


def test_the_container_and_its_history(monkeypatch):
    """``list(hook)`` is the pruning history; ``len``, indexing; ``apply`` returns the hook."""
    def program(lib, pruning):
        conv = make_model(lib)[0]
        first = pruning.RandomUnstructured.apply(conv, "weight", amount=0.3)
        second = pruning.LnStructured.apply(conv, "weight", amount=0.5, n=2, dim=0)
        third = pruning.L1Unstructured.apply(conv, "weight", amount=2)
        (hook,) = conv._forward_pre_hooks.values()
        return (type(first).__name__, type(second).__name__, second is third, hook is third,
                len(hook), [type(h).__name__ for h in hook], type(hook[1]).__name__,
                [type(h).__name__ for h in hook[1:]], hook[0] is first,
                conv.weight_mask.numpy().copy())
    ours, theirs = run_both(program, monkeypatch)
    assert ours[:-1] == theirs[:-1]
    np.testing.assert_array_equal(ours[-1], theirs[-1])
    assert ours[:5] == ("RandomUnstructured", "PruningContainer", True, True, 3)


def test_a_container_made_by_hand(monkeypatch):
    """``PruningContainer(m1, m2)`` leaves the name unset (as PyTorch: adding then raises
    AttributeError), ``PruningContainer(m)`` takes ``m``'s, and adding a method of another
    parameter raises ValueError, a non-method TypeError."""
    for _, pruning in LIBS.values():
        a, b = pruning.L1Unstructured(0.2), pruning.RandomUnstructured(0.1)
        a._tensor_name = b._tensor_name = "weight"
        with pytest.raises(AttributeError):
            pruning.PruningContainer(a, b)
        one = pruning.PruningContainer(a)
        assert one._tensor_name == "weight" and len(one) == 1
        one.add_pruning_method(b)
        assert list(one) == [a, b]
        c = pruning.Identity()
        c._tensor_name = "bias"
        with pytest.raises(ValueError, match="Can only add pruning methods acting on the "
                                             "parameter named 'weight'"):
            one.add_pruning_method(c)
        with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
            one.add_pruning_method("l1")
        empty = pruning.PruningContainer()
        assert len(empty) == 0
        with pytest.raises(AttributeError):
            empty._tensor_name  # noqa: B018 (never set)


# ------------------------------------------------------------------ global pruning


def _global(amount, method="L1Unstructured", scores=False):
    def step(model, pruning):
        lib = _lib_of(model)
        params = ((model[0], "weight"), (model[3], "weight"), (model[4], "weight"),
                  (model[4], "bias"))
        importance = None
        if scores:  # the conv's magnitudes count double
            importance = {(model[0], "weight"): model[0].weight.detach() * 2,
                          (model[4], "bias"): lib.zeros(3, dtype=lib.float64)}
        pruning.global_unstructured(params, pruning_method=getattr(pruning, method),
                                    importance_scores=importance, amount=amount)
    return step


@pytest.mark.parametrize("steps", [
    [_global(0.2)], [_global(50)], [_global(0.3, "RandomUnstructured")],
    [_global(0.25, scores=True)],
    [ONE_STEP["ln_structured n=1 dim 1"], _global(0.5)],  # the fc weight pruned before
    [_global(0.1), _global(0.1), lambda m, p: p.remove(m[3], "weight")],
], ids=["fraction", "count", "random", "importance scores", "after structured", "twice"])
def test_global_unstructured_as_torch(steps, monkeypatch):
    """One vector of all the parameters (or of their importance scores) and their masks so
    far; each parameter gets a CustomFromMask of its slice (a container if pruned before)."""
    ours, _ = both_pruned(steps, monkeypatch)
    total = sum(getattr(m, n).numel() for m, n in ((ours[0], "weight"), (ours[3], "weight"),
                                                   (ours[4], "weight"), (ours[4], "bias")))
    assert total == 72 + 320 + 15 + 3


def test_global_unstructured_errors_as_torch():
    for lib, pruning in LIBS.values():
        model = make_model(lib)
        with pytest.raises(TypeError, match="parameters is not an Iterable"):
            pruning.global_unstructured(5, pruning.L1Unstructured, amount=1)
        with pytest.raises(TypeError, match="importance_scores must be of type dict"):
            pruning.global_unstructured([(model[3], "weight")], pruning.L1Unstructured,
                                        importance_scores=[1], amount=1)
        with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE supported'):
            pruning.global_unstructured([(model[3], "weight")], pruning.LnStructured,
                                        amount=1, n=2, dim=0)
        with pytest.raises(ValueError):  # a generator is read once: nothing left for the masks
            pruning.global_unstructured(((m, "weight") for m in (model[3], model[4])),
                                        pruning.L1Unstructured, amount=1)
        with pytest.raises(ValueError, match="should be smaller than the number of parameters"):
            pruning.global_unstructured([(model[4], "bias")], pruning.L1Unstructured,
                                        amount=4)
        assert not pruning.is_pruned(model)


# ------------------------------------------------------------------ remove, is_pruned


def test_remove_makes_the_pruning_permanent_as_torch(monkeypatch):
    """After ``remove``: ``weight`` is a Parameter again (the ``weight_orig`` object, holding
    the pruned values), at the end of ``named_parameters`` (after ``bias``), no mask, no
    hook; removing again, or an unpruned parameter, raises ValueError."""
    ours, theirs = both_pruned([
        ONE_STEP["random_unstructured 0.3"], ONE_STEP["l1_unstructured bias 2"],
        ONE_STEP["ln_structured n=2"],
        lambda m, p: p.remove(m[0], "weight"),
        lambda m, p: p.remove(m[0], "bias"),
    ], monkeypatch)
    for model, pruning in ((ours, prune), (theirs, torch_prune)):
        assert [k for k, _ in model[0].named_parameters()] == ["weight", "bias"]
        assert not pruning.is_pruned(model) and not model[0]._forward_pre_hooks
        for name in ("weight", "bias", "nothing"):
            with pytest.raises(ValueError, match=f"Parameter '{name}' of module Conv2d"):
                pruning.remove(model[0], name)
        with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
            pruning.remove(model[3], "weight")


def test_remove_keeps_the_parameter_object(monkeypatch):
    """An optimizer made before pruning keeps training the same Parameter: ``weight_orig``
    is the original ``weight``, and after ``remove`` ``weight`` is that object again."""
    for lib, pruning in LIBS.values():
        lin = lib.nn.Linear(4, 3)
        weight = lin.weight
        pruning.l1_unstructured(lin, "weight", amount=5)
        assert lin.weight_orig is weight and pruning.is_pruned(lin)
        pruning.remove(lin, "weight")
        assert lin.weight is weight and int((weight == 0).sum()) == 5
        assert weight.requires_grad and weight.grad_fn is None


# ------------------------------------------------------------------ training a pruned model


def test_a_pruned_model_trains_as_torch(monkeypatch):
    """Forward (the hook recomputes ``weight`` from ``weight_orig`` before each call),
    backward (``weight_orig.grad`` is zero where pruned), SGD steps on ``weight_orig``: the
    same values as PyTorch's."""
    x = np.random.default_rng(1).standard_normal((6, 2, 6, 6))
    y = np.random.default_rng(2).integers(0, 3, 6)

    def program(lib, pruning):
        model = make_model(lib)
        pruning.random_unstructured(model[0], "weight", amount=0.4)
        pruning.ln_structured(model[3], "weight", amount=0.5, n=2, dim=0)
        pruning.l1_unstructured(model[3], "weight", amount=0.3)
        pruning.l1_unstructured(model[4], "bias", amount=1)
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses, grads = [], []
        for _ in range(3):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            grads.append([p.grad.numpy().copy() for p in model.parameters()])
            opt.step()
            losses.append(loss.item())
        model(lib.tensor(x))  # (the hooks bring weight up to date)
        return model, losses, grads
    (ours, our_losses, our_grads), (theirs, their_losses, their_grads) = run_both(program,
                                                                                monkeypatch)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-12)
    for a, b in zip(our_grads, their_grads, strict=True):
        for g, h in zip(a, b, strict=True):
            np.testing.assert_allclose(g, h, rtol=1e-10, atol=1e-13)
    # parameters of order 1 after three SGD steps: a few float64 roundings apart (2e-15 at a
    # small entry, -6.04e-5, once torch's BLAS ran after other tests), as the gradients above
    assert_same(describe(ours), describe(theirs), rtol=1e-12, atol=1e-13)
    assert [k for k, _ in ours.named_parameters()] == [
        "0.bias", "0.weight_orig", "3.bias", "3.weight_orig", "4.weight", "4.bias_orig"]
    mask = ours[0].weight_mask.numpy()
    assert np.all(our_grads[0][1][mask == 0] == 0)  # (0.weight_orig) no gradient where pruned
    np.testing.assert_array_equal(ours[0].weight.detach().numpy(),
                                  (ours[0].weight_orig * ours[0].weight_mask).detach().numpy())


def test_state_dict_of_a_pruned_model_loads_across(monkeypatch, tmp_path):
    """PyTorch's pruned state dict loads into a tinytrain model pruned alike (and back);
    into an unpruned one it raises (missing and unexpected keys), as PyTorch's does."""
    step = [lambda m, p: p.l1_unstructured(m[3], "weight", amount=0.5),
            lambda m, p: p.random_structured(m[0], "weight", 2, dim=0)]
    ours, theirs = both_pruned(step, monkeypatch)
    fresh = make_model(tt, seed=5)
    prune.identity(fresh[3], "weight")
    prune.identity(fresh[0], "weight")
    state = {k: tt.tensor(v.numpy()) for k, v in theirs.state_dict().items()}
    fresh.load_state_dict(state)
    assert_same({"d": describe(fresh)["buffers"]}, {"d": describe(ours)["buffers"]})
    with tt.no_grad():
        fresh(tt.zeros(1, 2, 6, 6, dtype=tt.float64))  # the hook recomputes weight
    np.testing.assert_array_equal(fresh[3].weight.numpy(), ours[3].weight.detach().numpy())
    for lib, model in ((tt, make_model(tt)), (torch, make_model(torch))):
        source = ours if lib is tt else theirs
        with pytest.raises(RuntimeError, match="weight_orig"):
            model.load_state_dict(source.state_dict())
    tt.save(ours.state_dict(), tmp_path / "pruned.pt")
    assert list(tt.load(tmp_path / "pruned.pt")) == list(theirs.state_dict())


# ------------------------------------------------------------------ custom methods


def _foobar(pruning):
    class FooBarPruningMethod(pruning.BasePruningMethod):
        """The tutorial's: every other entry."""
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.flatten()[::2] = 0
            return mask
    return FooBarPruningMethod


def test_a_custom_method_as_torch(monkeypatch):
    """A ``BasePruningMethod`` subclass (``mask.flatten()[::2] = 0`` writes through the view
    of a contiguous clone), alone and in a container after a built-in method; its
    module-free ``prune(t)``."""
    def program(lib, pruning):
        foobar = _foobar(pruning)
        model = make_model(lib)
        foobar.apply(model[4], "bias")
        pruning.l1_unstructured(model[3], "weight", amount=0.5)
        foobar.apply(model[3], "weight")
        t = lib.tensor(np.arange(1.0, 7.0).reshape(2, 3))
        return (describe(model), foobar().prune(t).numpy(),
                foobar().prune(t, default_mask=lib.tensor([[1.0, 0, 1], [1, 1, 1]])).numpy())
    (ours, *ours_t), (theirs, *theirs_t) = run_both(program, monkeypatch)
    assert_same(ours, theirs)
    for a, b in zip(ours_t, theirs_t):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours_t[0], [[0, 2, 0], [4, 0, 6]])


def test_custom_methods_that_break_the_rules_fail_as_torch():
    """No ``compute_mask``: TypeError (abstract); a structured method without ``dim``:
    AttributeError; an unknown PRUNING_TYPE: ValueError; all on the second pruning, where
    the container reads them."""
    for lib, pruning in LIBS.values():
        class NoMask(pruning.BasePruningMethod):
            PRUNING_TYPE = "unstructured"
        with pytest.raises(TypeError, match="abstract"):
            NoMask()

        class NoDim(pruning.BasePruningMethod):
            PRUNING_TYPE = "structured"

            def compute_mask(self, t, default_mask):
                return default_mask

        class Odd(NoDim):
            PRUNING_TYPE = "diagonal"
        for method, error, match in ((NoDim, AttributeError, "need to have the attribute `dim`"),
                                     (Odd, ValueError, "Unrecognized PRUNING_TYPE diagonal")):
            lin = lib.nn.Linear(3, 2)
            pruning.identity(lin, "weight")
            with pytest.raises(error, match=match):
                method.apply(lin, "weight")


def test_prune_without_a_module_as_torch(monkeypatch):
    """``method.prune(t, default_mask, importance_scores)``."""
    t = np.random.default_rng(3).standard_normal((4, 5))
    scores = np.abs(np.random.default_rng(4).standard_normal((4, 5)))

    def program(lib, pruning):
        x = lib.tensor(t)
        return [r.numpy() for r in (
            pruning.L1Unstructured(0.5).prune(x),
            pruning.L1Unstructured(3).prune(x, importance_scores=lib.tensor(scores)),
            pruning.LnStructured(2, n=1, dim=1).prune(x, default_mask=lib.ones(4, 5)),
            pruning.RandomStructured(0.5, dim=0).prune(x),
            pruning.RandomUnstructured(7).prune(x),
            pruning.Identity().prune(x))]
    ours, theirs = run_both(program, monkeypatch)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
    for _, pruning in LIBS.values():
        x = tt.ones(2, 3) if pruning is prune else torch.ones(2, 3)
        with pytest.raises(AssertionError, match="importance_scores should have the same shape"):
            pruning.L1Unstructured(1).prune(x, importance_scores=x[0])


# ------------------------------------------------------------------ errors


BAD = [
    ("amount 'a'", lambda m, p: p.l1_unstructured(m[3], "weight", amount="a"), TypeError,
     "Invalid type for amount"),
    ("amount -1", lambda m, p: p.random_unstructured(m[3], "weight", amount=-1), ValueError,
     "should either be a float in the range"),
    ("amount 1.5", lambda m, p: p.ln_structured(m[3], "weight", 1.5, n=2, dim=0), ValueError,
     "should either be a float in the range"),
    ("amount -0.1", lambda m, p: p.random_structured(m[3], "weight", -0.1, dim=0), ValueError,
     "should either be a float in the range"),
    ("amount > size", lambda m, p: p.l1_unstructured(m[4], "bias", amount=4), ValueError,
     "amount=4 should be smaller than the number of parameters to prune=3"),
    ("channels > size", lambda m, p: p.ln_structured(m[4], "weight", 4, n=2, dim=0),
     ValueError, "amount=4 should be smaller than the number of parameters to prune=3"),
    ("structured 1-d", lambda m, p: p.random_structured(m[4], "bias", 1, dim=0), ValueError,
     "Structured pruning can only be applied to multidimensional tensors"),
    ("dim too big", lambda m, p: p.ln_structured(m[0], "weight", 1, n=2, dim=4), IndexError,
     "Invalid index 4 for tensor of size"),
    ("dim too negative", lambda m, p: p.ln_structured(m[4], "weight", 1, n=2, dim=-3),
     IndexError, None),
    ("scores' shape", lambda m, p: p.l1_unstructured(m[4], "weight", 1, importance_scores=
                                                       _lib_of(m).ones(5, 3)),
     AssertionError, "importance_scores should have the same shape as parameter weight"),
    ("no such parameter", lambda m, p: p.l1_unstructured(m[4], "gamma", 1), AttributeError,
     "gamma"),
    ("custom mask shape", lambda m, p: p.custom_from_mask(m[4], "bias", _lib_of(m).ones(4)),
     AssertionError, "must match self.mask shape"),
    ("nuclear norm", lambda m, p: p.ln_structured(m[4], "weight", 1, n="nuc", dim=0),
     RuntimeError, None),
    ("fro over 3 dims", lambda m, p: p.ln_structured(m[0], "weight", 1, n="fro", dim=0),
     RuntimeError, "dim must be a 2-tuple"),
]


@pytest.mark.parametrize(("what", "step", "error", "match"), BAD, ids=[b[0] for b in BAD])
def test_bad_pruning_raises_as_torch_and_leaves_the_module(what, step, error, match):
    """The error type (and message) of PyTorch's; a failed first pruning leaves the module
    unpruned (the parameter is a Parameter again, now after the others, as PyTorch
    re-registers it; no mask, no hook)."""
    after = []
    for lib, pruning in LIBS.values():
        model = make_model(lib)
        before = describe(model)
        with pytest.raises(error, match=match):
            step(model, pruning)
        after.append(describe(model))
        assert not after[-1]["buffers"] and not after[-1]["hooks"]
        assert {k for k, _ in after[-1]["parameters"]} == {k for k, _ in before["parameters"]}
    assert_same(*after)


@pytest.mark.parametrize(("what", "step", "error", "match"), BAD, ids=[b[0] for b in BAD])
def test_bad_pruning_of_a_pruned_parameter_as_torch(what, step, error, match, monkeypatch):
    """The same mistakes on parameters pruned before (a container, acting on what is left):
    the same outcome as PyTorch's, error or not (a 1-d bias pruned by channels: PyTorch's
    ``sum(dim=[])`` sums everything, so its one "channel" goes), and the module left as
    PyTorch leaves it (the old hook already taken off when the new method fails to be
    made)."""
    def program(lib, pruning):
        model = make_model(lib)
        for m, name in ((model[3], "weight"), (model[4], "bias"), (model[0], "weight"),
                        (model[4], "weight")):
            pruning.random_unstructured(m, name, amount=1)
        try:
            step(model, pruning)
            raised = None
        except Exception as e:  # noqa: BLE001 (compared with PyTorch's)
            raised = (type(e).__mro__[1:] if type(e).__module__.startswith("tinytrain")
                      else type(e).__mro__, str(e))
        return describe(model), raised
    (ours, our_error), (theirs, their_error) = run_both(program, monkeypatch)
    assert_same(ours, theirs)
    assert (our_error is None) == (their_error is None), (our_error, their_error)
    if our_error is not None:
        assert their_error[0][0] in our_error[0], (our_error, their_error)  # torch's type


def test_is_pruned_looks_at_every_submodule():
    for lib, pruning in LIBS.values():
        model = make_model(lib)
        assert not pruning.is_pruned(model)
        model[4].register_forward_pre_hook(lambda m, args: None)
        assert not pruning.is_pruned(model)  # a hook that is not a pruning method
        pruning.identity(model[4], "weight")
        assert pruning.is_pruned(model) and pruning.is_pruned(model[4])
        assert not pruning.is_pruned(model[3])


def test_hooks_repr_and_keys_as_torch():
    """``module._forward_pre_hooks``: an OrderedDict of hook id -> method, a new id for the
    container that replaces a method (it goes last, after other hooks)."""
    for lib, pruning in LIBS.values():
        lin = lib.nn.Linear(3, 2)
        pruning.identity(lin, "weight")
        pruning.identity(lin, "bias")
        (w_id, _), (b_id, _) = lin._forward_pre_hooks.items()
        pruning.l1_unstructured(lin, "weight", 1)
        (b2, b_hook), (w2, w_hook) = lin._forward_pre_hooks.items()
        assert b2 == b_id and w2 > b_id > w_id
        assert type(w_hook).__name__ == "PruningContainer" and len(w_hook) == 2
        text = repr(lin._forward_pre_hooks)
        assert text.startswith(f"OrderedDict([({b_id}, <{lib.__name__}.nn.utils.prune."
                               f"Identity object at 0x")


def test_pruning_on_the_device(device):
    """Masks, pruned tensors and the random draws' masks on the parameter's device."""
    model = make_model(tt).to(device)
    prune.random_unstructured(model[0], "weight", amount=0.3)
    prune.random_structured(model[3], "weight", 2, dim=0)
    prune.ln_structured(model[3], "weight", 1, n=1, dim=1)
    prune.global_unstructured([(model[0], "weight"), (model[4], "weight")],
                              pruning_method=prune.L1Unstructured, amount=10)
    for m in (model[0], model[3], model[4]):
        assert m.weight_mask.device == m.weight.device == tt.device(device)
    out = model(tt.ones(2, 2, 6, 6, dtype=tt.float64, device=device))
    out.sum().backward()
    assert model[0].weight_orig.grad.device == tt.device(device)
    assert int((model[3].weight_mask.sum(1) == 0).sum().item()) == 2
