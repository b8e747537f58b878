"""Module hooks as PyTorch's: ``register_forward_hook`` / ``register_forward_pre_hook`` with
``prepend``, ``with_kwargs`` and ``always_call``, and ``register_full_backward_hook`` /
``register_full_backward_pre_hook`` (identity nodes around a call's inputs and outputs), each
run side by side with torch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt

LIBS = {"torch": torch, "tt": tt}


def _libs():
    return LIBS.items()


def _plain(grads):
    """A hook's tuple of gradients as lists (None stays None), comparable across libraries."""
    return tuple(None if g is None else np.round(g.detach().numpy().astype(float), 5).tolist()
                 for g in grads)


def _linear_pair():
    """A Linear(3, 2) in each library with the same weights."""
    w = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], np.float32)
    b = np.array([0.1, -0.2], np.float32)
    layers = {}
    for name, L in _libs():
        layer = L.nn.Linear(3, 2)
        with L.no_grad():
            layer.weight.copy_(L.tensor(w))
            layer.bias.copy_(L.tensor(b))
        layers[name] = layer
    return layers


X = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)


def _run(build, inputs, loss=lambda out: out.sum(), pre=None):
    """For each library: ``build(L)`` -> a module, register a backward hook (and ``pre`` as a
    backward pre-hook) that records what it sees, call it on ``inputs(L)``, backward
    ``loss``; returns what each library's hooks saw and the inputs' gradients."""
    seen = {}
    for name, L in _libs():
        module, calls = build(L, name), []
        module.register_full_backward_hook(
            lambda m, gi, go, calls=calls: calls.append(("hook", type(m).__name__, _plain(gi),
                                                         _plain(go))))
        if pre is not None:
            module.register_full_backward_pre_hook(
                lambda m, go, calls=calls, L=L: calls.append(("pre", _plain(go))) or pre(L, go))
        args = inputs(L)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch's when no input requires grad)
            loss(module(*args)).backward()
        grads = [_plain([a.grad]) if isinstance(a, L.Tensor) and a.requires_grad else None
                 for a in args]
        seen[name] = (calls, grads)
    return seen


def test_backward_hook_of_a_linear_sees_torchs_gradients():
    layers = _linear_pair()
    seen = _run(lambda L, name: layers[name],
                lambda L: (L.tensor(X, requires_grad=True),), pre=lambda L, go: None)
    assert seen["tt"] == seen["torch"]
    assert [c[0] for c in seen["tt"][0]] == ["pre", "hook"]


def test_backward_hook_of_a_sequential_and_of_its_layers_run_in_torchs_order():
    def build(L, name):
        torch.manual_seed(0)
        ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        if L is torch:
            model = ref
        else:
            model = tt.nn.Sequential(tt.nn.Linear(3, 4), tt.nn.ReLU(), tt.nn.Linear(4, 2))
            model.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        order = orders[name]
        for i, layer in enumerate(model):
            layer.register_full_backward_hook(lambda m, gi, go, i=i: order.append(i))
        return model

    orders = {"torch": [], "tt": []}
    seen = _run(build, lambda L: (L.tensor(X, requires_grad=True),),
                loss=lambda out: (out * out).sum())
    assert seen["tt"] == seen["torch"]
    assert orders["tt"] == orders["torch"] == [2, 1, 0]


class _Two:
    """A module of two inputs and two outputs, in either library."""

    @staticmethod
    def build(L, name):
        class Two(L.nn.Module):
            def forward(self, a, b, scale=1.0):
                return a * b * scale, a + 1

        return Two()


A, B = np.array([1.0, -2.0, 3.0], np.float32), np.array([0.5, 0.25, 2.0], np.float32)


@pytest.mark.parametrize("a_grad,b_grad", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("use", ["first", "second", "both"])
def test_two_inputs_and_outputs_zeros_for_inputs_without_grad_none_for_unused_outputs(
        a_grad, b_grad, use):
    if use == "second" and not a_grad:
        pytest.skip("a + 1 of an a that needs no grad: nothing to backward")
    loss = {"first": lambda o: o[0].sum(), "second": lambda o: o[1].sum(),
            "both": lambda o: (o[0] * o[1]).sum()}[use]
    seen = _run(_Two.build, lambda L: (L.tensor(A, requires_grad=a_grad),
                                       L.tensor(B, requires_grad=b_grad)), loss=loss)
    assert seen["tt"] == seen["torch"]


def test_non_tensor_arguments_are_none_and_integer_tensors_get_integer_zeros():
    def build(L, name):
        class Pick(L.nn.Module):
            def forward(self, a, index, factor):
                return a[index] * factor

        return Pick()

    seen = _run(build, lambda L: (L.tensor(A, requires_grad=True), L.tensor([0, 2]), 3.0))
    assert seen["tt"] == seen["torch"]
    assert seen["tt"][0][0][2] == ([3.0, 0.0, 3.0], [0, 0], None)


def test_without_an_input_that_requires_grad_the_hooks_run_at_the_outputs():
    layers = _linear_pair()
    seen = _run(lambda L, name: layers[name], lambda L: (L.tensor(X),))
    assert seen["tt"] == seen["torch"]
    assert seen["tt"][0][0][2] == (None,)
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        layers["tt"](tt.tensor(X)).sum().backward()
    layers["tt"].register_full_backward_hook(lambda m, gi, go: (tt.ones(2, 3),))
    with pytest.raises(RuntimeError, match="should always return None"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layers["tt"](tt.tensor(X)).sum().backward()


def test_a_hook_that_returns_grad_input_replaces_it_and_a_pre_hook_grad_output():
    for name, L in _libs():
        layer = _linear_pair()[name]
        x = L.tensor(X, requires_grad=True)
        layer(x).sum().backward()
        plain = x.grad.numpy().copy()
        x.grad = None
        handle = layer.register_full_backward_hook(lambda m, gi, go: (gi[0] * 10,))
        layer(x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), plain * 10, rtol=1e-6)
        handle.remove()  # removed: the gradient is the plain one again
        x.grad, layer.weight.grad = None, None
        layer(x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), plain, rtol=1e-6)
        weight = layer.weight.grad.numpy().copy()
        x.grad, layer.weight.grad = None, None
        layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
        layer(x).sum().backward()  # the doubled grad_output reaches the weight and the input
        np.testing.assert_allclose(x.grad.numpy(), plain * 2, rtol=1e-6)
        np.testing.assert_allclose(layer.weight.grad.numpy(), weight * 2, rtol=1e-6)


@pytest.mark.parametrize("register,message", [
    ("register_full_backward_hook", "Backward hook returned an invalid number of grad_input, "
                                    "got 2, but expected 1"),
    ("register_full_backward_pre_hook", "Backward pre hook returned an invalid number of "
                                        "grad_output, got 2, but expected 1"),
])
def test_a_hook_returning_the_wrong_number_of_gradients_is_torchs_error(register, message):
    for name, L in _libs():
        layer = _linear_pair()[name]
        if register == "register_full_backward_hook":
            layer.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
        else:
            layer.register_full_backward_pre_hook(lambda m, go: (go[0], go[0]))
        with pytest.raises(RuntimeError, match=message):
            layer(L.tensor(X, requires_grad=True)).sum().backward()


def test_backward_hooks_run_once_per_call_and_per_backward_and_not_without_grad():
    for name in LIBS:
        _check_backward_hooks_run_once_per_call(name)


def _check_backward_hooks_run_once_per_call(name):
    L = LIBS[name]
    layer, calls = _linear_pair()[name], []
    layer.register_full_backward_hook(lambda m, gi, go: calls.append(gi[0].shape))
    x = L.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    lin = L.nn.Linear(2, 3)
    layer(layer(lin(x)).sum(1, keepdim=True).expand(2, 3)).sum().backward()
    assert len(calls) == 2
    y = layer(L.tensor(X, requires_grad=True))
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert len(calls) == 4
    with L.no_grad():
        layer(L.tensor(X, requires_grad=True))
    assert len(calls) == 4
    out = layer(L.tensor(X, requires_grad=True))
    assert out.grad_fn.name() == "BackwardHookFunctionBackward"


def test_forward_hooks_prepend_with_kwargs_and_always_call_as_torch():
    for name in LIBS:
        _check_forward_hooks(name)


def _check_forward_hooks(name):
    L = LIBS[name]
    layer, calls = _linear_pair()[name], []
    layer.register_forward_hook(lambda m, a, out: calls.append("second"))
    layer.register_forward_hook(lambda m, a, out: calls.append("first"), prepend=True)
    layer.register_forward_pre_hook(lambda m, a: calls.append("pre second"))
    layer.register_forward_pre_hook(lambda m, a: calls.append("pre first"), prepend=True)
    layer(L.tensor(X))
    assert calls == ["pre first", "pre second", "first", "second"]

    class Scaled(L.nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    m = Scaled()
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"scale": 3.0}),
                                with_kwargs=True)
    h = m.register_forward_hook(lambda mod, args, kwargs, out: out + kwargs["scale"],
                                with_kwargs=True)
    assert m(L.tensor([1.0])).tolist() == [6.0]
    h.remove()
    assert m(L.tensor([1.0])).tolist() == [3.0]
    m.register_forward_pre_hook(lambda mod, args, kwargs: "bad", with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple "
                                           "of \\(new_args, new_kwargs\\), but got bad"):
        m(L.tensor([1.0]))

    class Fails(L.nn.Module):
        def forward(self, x):
            raise ValueError("forward failed")

    f, ran = Fails(), []
    f.register_forward_hook(lambda mod, a, out: ran.append("plain"))
    f.register_forward_hook(lambda mod, a, out: ran.append(("always", out)),
                            always_call=True)
    with pytest.raises(ValueError, match="forward failed"):
        f(L.tensor([1.0]))
    assert ran == [("always", None)]


def test_hook_handles_remove_every_option_of_their_hook():
    layer = tt.nn.Linear(2, 2)
    handle = layer.register_forward_hook(lambda *a: None, with_kwargs=True, always_call=True)
    pre = layer.register_forward_pre_hook(lambda *a: None, with_kwargs=True)
    back = layer.register_full_backward_hook(lambda *a: None)
    back_pre = layer.register_full_backward_pre_hook(lambda *a: None)
    for h in (handle, pre, back, back_pre):
        h.remove()
    assert not (layer._forward_hooks or layer._forward_hooks_with_kwargs
                or layer._forward_hooks_always_called or layer._forward_pre_hooks
                or layer._forward_pre_hooks_with_kwargs or layer._backward_hooks
                or layer._backward_pre_hooks)
    from tinytrain.utils.hooks import RemovableHandle

    assert isinstance(handle, RemovableHandle)


def test_an_in_place_op_on_a_hooked_input_or_output_is_refused_as_in_torch():
    """The tensors a module with backward hooks sees and returns share the originals' memory:
    writing them in place would change the originals around the hooks' node (a leaf's
    values, silently). PyTorch refuses it; so does tinytrain."""
    class InPlace(tt.nn.Module):
        def forward(self, x):
            return x.relu_() * 2

    module = InPlace()
    module.register_full_backward_hook(lambda *args: None)
    x = tt.tensor([-1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        module(x)
    assert x.tolist() == [-1.0, 2.0]
    with pytest.raises(RuntimeError, match="seen through its backward hooks"):
        module(x * 1)
    layer = _linear_pair()["tt"]
    layer.register_full_backward_hook(lambda *args: None)
    with pytest.raises(RuntimeError, match="seen through its backward hooks"):
        layer(tt.tensor(X, requires_grad=True)).relu_()


def test_a_module_pickled_before_the_hook_tables_existed_loads_and_runs():
    """A module pickled by the previous version has only _forward_hooks and
    _forward_pre_hooks: calling it after unpickling raised AttributeError
    '_backward_hooks'; PyTorch's __setstate__ fills the missing tables in."""
    import pickle

    old = tt.nn.Sequential(tt.nn.Linear(3, 2), tt.nn.ReLU())
    x = tt.ones(1, 3)
    expected = old(x).tolist()
    for module in old.modules():
        for name in ("_backward_hooks", "_backward_pre_hooks", "_forward_pre_hooks_with_kwargs",
                     "_forward_hooks_with_kwargs", "_forward_hooks_always_called"):
            del module.__dict__[name]
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded(x).tolist() == expected
    calls = []
    handle = loaded.register_full_backward_hook(lambda m, gi, go: calls.append(len(gi)))
    loaded(x.requires_grad_()).sum().backward()
    assert calls == [1]
    handle.remove()
