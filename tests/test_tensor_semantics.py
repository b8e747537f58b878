"""Tensor behaviour learners rely on, as PyTorch has it: truth values and conversions,
iteration, in-place ops and their guard (version counters), grad modes, max/min with a
dim, view, and index gradients. Each case runs the same code on torch where torch has it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import nn

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)


def pair(values=X, requires_grad=False, dtype=None):
    """The same values as a tinytrain and a torch tensor."""
    a = np.asarray(values) if dtype is None else np.asarray(values, dtype=dtype)
    return (tt.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def same(ours, ref, rtol=1e-6):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert ours.shape == tuple(ref.shape) and str(ours.dtype) == str(ref.dtype)
    np.testing.assert_allclose(ours.numpy(), ref, rtol=rtol)


def raises_like_torch(ours_fn, torch_fn, match):
    """Both raise; ours with a message matching ``match`` (torch's wording)."""
    with pytest.raises(RuntimeError, match=match):
        torch_fn()
    with pytest.raises(RuntimeError, match=match):
        ours_fn()


# ------------------------------------------------------------------ 1. truth value


@pytest.mark.parametrize("lib", [tt, torch])
def test_truth_value_of_one_element_comparisons(lib):
    assert bool(lib.tensor([0.0]) == 1) is False
    assert bool(lib.tensor([1.0]) == 1) is True
    loss = lib.tensor(0.3)
    assert (loss > 0) and not (loss < 0)
    if loss > 0:  # the tutorial line that raised about len()
        pass


@pytest.mark.parametrize("values,match", [([1.0, 2.0], "more than one value"), ([], "no values")])
def test_truth_value_of_other_sizes_is_ambiguous(values, match):
    raises_like_torch(lambda: bool(tt.tensor(values)), lambda: bool(torch.tensor(values)),
                      f"Boolean value of Tensor with {match} is ambiguous")


def test_parameters_in_lists_compare_by_identity_first_as_in_torch():
    p1, p2 = nn.Parameter(np.zeros(3, np.float32)), nn.Parameter(np.zeros(3, np.float32))
    t1, t2 = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3))
    assert p1 in [p1] and t1 in [t1]
    assert [p1, p2].index(p1) == [t1, t2].index(t1) == 0
    # distinct multi-element tensors: Python falls back to ==, which is ambiguous
    raises_like_torch(lambda: p1 in [p2], lambda: t1 in [t2], "ambiguous")
    # one element: == decides, as in torch
    q1, q2, q3 = (nn.Parameter(np.array([v], np.float32)) for v in (1.0, 1.0, 2.0))
    assert (q1 in [q2]) is True and (q1 in [q3]) is False
    assert (torch.nn.Parameter(torch.ones(1)) in [torch.nn.Parameter(torch.ones(1))]) is True


def test_tensors_hash_by_identity():
    a, b = tt.zeros(2), tt.zeros(2)
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b" and len({a, b, a}) == 2
    assert hash(a) == object.__hash__(a)


def test_eq_with_other_types_is_false_not_an_error():
    t, r = tt.tensor([1, 2]), torch.tensor([1, 2])
    assert (t == None) is (r == None) is False  # noqa: E711
    assert (t != "a") is (r != "a") is True


@pytest.mark.parametrize("lib", [tt, torch])
def test_int_float_and_index_conversions(lib):
    classes = ("plane", "car", "bird", "cat")
    label = lib.tensor(2)
    assert classes[label] == "bird" and [10, 20, 30][lib.tensor([1])] == 20
    assert int(lib.tensor([2.7])) == 2 and float(lib.tensor([[3]])) == 3.0
    assert f"{classes[lib.tensor(3)]:5s}" == "cat  "
    assert int(lib.tensor(True)) == 1 and ["no", "yes"][lib.tensor(True)] == "yes"


def test_conversion_errors_match_torch():
    raises_like_torch(lambda: tt.ones(2).item(), lambda: torch.ones(2).item(),
                      "a Tensor with 2 elements cannot be converted to Scalar")
    for ours, ref in ((lambda: int(tt.tensor([1, 2])), lambda: int(torch.tensor([1, 2]))),
                      (lambda: float(tt.ones(2)), lambda: float(torch.ones(2)))):
        with pytest.raises(ValueError):
            ref()
        with pytest.raises(ValueError, match="only one element tensors"):
            ours()
    for t in (torch.tensor(1.5), torch.tensor([1, 2])):
        with pytest.raises(TypeError):
            [1, 2, 3][t]
    for t in (tt.tensor(1.5), tt.tensor([1, 2])):
        with pytest.raises(TypeError, match="only integer tensors of a single element"):
            [1, 2, 3][t]


def test_iteration_over_dim_0():
    labels, preds = tt.tensor([1, 2, 3]), tt.tensor([1, 0, 3])
    tl, tp = torch.tensor([1, 2, 3]), torch.tensor([1, 0, 3])
    ours = [bool(a == b) for a, b in zip(labels, preds)]
    assert ours == [bool(a == b) for a, b in zip(tl, tp)] == [True, False, True]
    rows = list(tt.tensor(X))
    assert len(rows) == 2 and all(r.shape == (3,) for r in rows)
    np.testing.assert_array_equal(rows[1].numpy(), X[1])
    for lib in (tt, torch):
        with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
            iter(lib.tensor(3))


def test_iteration_is_differentiable():
    x, t = pair(X, requires_grad=True)
    sum(r * (i + 1) for i, r in enumerate(x)).sum().backward()
    sum(r * (i + 1) for i, r in enumerate(t)).sum().backward()
    same(x.grad, t.grad)


def test_contains_and_numpy_conversion():
    t = tt.tensor([1, 2, 3])
    assert 2 in t and 5 not in t and (2 in torch.tensor([1, 2, 3]))
    np.testing.assert_array_equal(np.asarray(t), [1, 2, 3])
    np.testing.assert_array_equal(np.asarray(torch.tensor([1, 2, 3])), [1, 2, 3])
    assert isinstance(np.ones(3) + tt.ones(3), tt.Tensor)  # ndarray defers to the Tensor


def test_np_array_copies_and_np_asarray_shares_as_with_torch():
    for lib in (tt, torch):
        t = lib.zeros(3)
        copied, shared = np.array(t), np.asarray(t)
        copied[0], shared[1] = 7.0, 5.0
        assert t.tolist() == [0.0, 5.0, 0.0], lib.__name__
    assert np.array(tt.zeros(2), dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="copy"):
        np.array(tt.zeros(2), dtype=np.float64, copy=False)


# PyTorch applies integer indices first, as a select; NumPy would put the broadcast
# dimension of the integer and the list first when a slice separates them.
@pytest.mark.parametrize("key", [
    (0, slice(None), [1, 2]),
    ([1, 0], slice(None), 0),
    (Ellipsis, 0, slice(1, 3), [0, 4]),
    (1, slice(None), slice(None), [[0, 1], [2, 3]]),
    (0, slice(None), [True, False, True, True]),
    (0, [1, 2]),  # side by side: both orders agree
])
def test_indexing_that_mixes_integers_and_lists_matches_torch(key):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    ours, theirs = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = ours[key], theirs[tuple(torch.tensor(k) if isinstance(k, list) else k for k in key)]
    assert y.shape == tuple(ty.shape)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    g = np.random.default_rng(0).standard_normal(y.shape).astype(np.float32)
    y.backward(tt.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


# ------------------------------------------------------------------ 2. in-place ops


def sgd_by_hand(lib, module, steps=3, lr=0.1):
    """The first hand-written training loop a learner writes."""
    lib.manual_seed(0)
    model = module.Linear(3, 2)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(X * 0.5))
        model.bias.fill_(0.1)
    x = lib.tensor(X)
    for _ in range(steps):
        loss = (model(x) ** 2).mean()
        model.zero_grad()
        loss.backward()
        with lib.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return model


def test_hand_written_sgd_updates_the_model_in_place():
    ours, ref = sgd_by_hand(tt, nn), sgd_by_hand(torch, torch.nn)
    same(ours.weight, ref.weight, rtol=1e-5)
    same(ours.bias, ref.bias, rtol=1e-5)
    assert not np.allclose(ours.bias.numpy(), 0.1)  # it did train


@pytest.mark.parametrize("op", [
    lambda t: t.add_(2.0), lambda t: t.add_(torch_or_tt(t).ones(3), alpha=-0.5),
    lambda t: t.sub_(1.5), lambda t: t.mul_(3.0), lambda t: t.div_(4.0), lambda t: t.zero_(),
    lambda t: t.fill_(7.0), lambda t: t.clamp_(-0.6, 0.6), lambda t: t.clamp_(min=0.0),
    lambda t: t.clip_(max=0.1), lambda t: t.copy_(torch_or_tt(t).ones(3) * 4),
    lambda t: t.pow_(2), lambda t: t.relu_(),
    lambda t: t.__iadd__(1.0), lambda t: t.__isub__(1.0), lambda t: t.__imul__(2.0),
    lambda t: t.__itruediv__(2.0),
])
def test_inplace_ops_write_into_self_and_return_it(op):
    x, t = pair(X)
    view, tview = x[0], t[0]
    assert op(x) is x and op(t) is t
    same(x, t)
    same(view, tview)  # the write went into the memory views see
    assert x._version == t._version == view._version == tview._version


def torch_or_tt(t):
    return torch if isinstance(t, torch.Tensor) else tt


def test_setitem_writes_in_place():
    x, t = pair(X)
    for idx, value in ((0, 5.0), ((slice(None), 1), -1.0), (np.array([1, 0]), 2.0)):
        x[idx] = value
        t[torch.as_tensor(idx) if isinstance(idx, np.ndarray) else idx] = value
        same(x, t)
    m, tm = tt.tensor(X) > 0, torch.tensor(X) > 0
    x[m] = 0.0
    t[tm] = 0.0
    same(x, t)


def test_inplace_on_leaf_that_requires_grad_raises_torchs_error():
    x, t = pair(X, requires_grad=True)
    raises_like_torch(lambda: x.add_(1), lambda: t.add_(1),
                      "a leaf Variable that requires grad is being used in an in-place")
    raises_like_torch(lambda: x[0].mul_(2), lambda: t[0].mul_(2),
                      "a view of a leaf Variable that requires grad")
    with tt.no_grad():
        x.add_(1)  # allowed under no_grad, as in torch
    assert x.is_leaf and x.requires_grad and np.allclose(x.numpy(), X + 1)


def test_inplace_in_the_graph_continues_the_graph():
    def f(lib, x, w):
        y = x * 2
        y.mul_(w)      # needs y's old value for w's gradient: a copy is kept
        y += 1
        y.clamp_(max=3.0)
        z = y * 1
        z[0, 1] = w[1, 2]  # the gradient of that entry goes to w
        return z.sum() + (y * y).sum()

    x, tx = pair(X, requires_grad=True)
    w, tw = pair(X[::-1].copy() + 1, requires_grad=True)
    f(tt, x, w).backward()
    f(torch, tx, tw).backward()
    same(x.grad, tx.grad, rtol=1e-5)
    same(w.grad, tw.grad, rtol=1e-5)


def test_inplace_on_slices_in_the_graph_rewrites_the_base_as_torch():
    def f(lib, w):
        x = w * 1
        x[0] += 1                # a slice, in place: x's graph must record it
        x[:, 1].mul_(w[0, 2])
        row = x[1]
        row.clamp_(max=0.5)
        row[::2].zero_()         # a slice of a slice
        return (x * x).sum() + (row * 3).sum()

    w, tw = pair(X, requires_grad=True)
    f(tt, w).backward()
    f(torch, tw).backward()
    same(w.grad, tw.grad, rtol=1e-5)
    x = w * 1
    with pytest.raises(RuntimeError, match="holds some of its elements more than once"):
        x[:1].expand(2, 3).mul_(2)  # torch refuses too


_REARRANGING_WRITES = {
    "reshape": lambda x, L: x.reshape(6).mul_(2),
    "view": lambda x, L: x.view(3, 2).relu_(),
    "T": lambda x, L: x.T.add_(L.tensor([1.0, 2.0])),
    "permute, then reshape": lambda x, L: x.permute(1, 0).reshape(6).mul_(3),
    "unsqueeze": lambda x, L: x.unsqueeze(0).clamp_(-1, 1),
    "a slice of a reshape": lambda x, L: x.reshape(6)[1:4].mul_(5),
    "a transpose of a slice": lambda x, L: x[:, 1:].T.mul_(5),
    "two transposes": lambda x, L: x.transpose(0, 1).transpose(0, 1).sub_(1),
    "setitem through a view": lambda x, L: (x.view(6).__setitem__(slice(0, 2), 7.0),
                                            x.view(6))[1],
}


@pytest.mark.parametrize("write", _REARRANGING_WRITES.values(), ids=_REARRANGING_WRITES)
def test_inplace_ops_on_views_that_rearrange_the_base_write_through_as_torch(write):
    """x.reshape(6).mul_(2) with autograd was refused (only slices wrote through): the base's
    graph now records the write, as PyTorch's, for any view holding all of the base."""
    def f(lib):
        w = lib.tensor(np.arange(6.0).reshape(2, 3) - 2, requires_grad=True)
        x = w * 1
        y = write(x, lib)
        weights = lib.tensor(np.arange(6.0).reshape(2, 3) + 1)
        ((x * weights).sum() + (y * y).sum()).backward()
        return x, y, w.grad

    for got, ref in zip(f(tt), f(torch)):
        same(got, ref)


def test_an_element_is_a_view_so_inplace_ops_on_it_write_through_as_torch():
    """x[i, j] (every dimension an integer) is a 0-d view in PyTorch; NumPy would give a
    copied scalar, and x[i, j].fill_(v) would change nothing."""
    def f(lib):
        x = lib.ones(2, 3)
        x[0, 1].fill_(5)
        x[1][2].add_(3)          # an element of a row view
        x[-1, 0].mul_(-2)
        with lib.no_grad():
            p = lib.ones(3, requires_grad=True)
            p[0].zero_()             # under no_grad: a parameter's entry
        y = p * 2
        y[1].mul_(5)             # recorded: the graph sees the write
        y.sum().backward()
        return x, p, p.grad

    for ours, theirs in zip(f(tt), f(torch)):
        same(ours, theirs)
    p = tt.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        p[0].mul_(2)
    e = tt.arange(4)[2]
    assert e.shape == () and e.item() == 2 and type(e.item()) is int


def test_inplace_into_a_tensor_without_grad_records_the_other_operand():
    w, tw = pair(X, requires_grad=True)
    buf, tbuf = tt.ones(2, 3), torch.ones(2, 3)
    buf.mul_(w)
    tbuf.mul_(tw)
    assert buf.requires_grad and not buf.is_leaf
    (buf * buf).sum().backward()
    (tbuf * tbuf).sum().backward()
    same(w.grad, tw.grad)


def test_inplace_shape_and_dtype_rules_match_torch():
    raises_like_torch(lambda: tt.ones(3).add_(tt.ones(2, 3)),
                      lambda: torch.ones(3).add_(torch.ones(2, 3)),
                      r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]")
    raises_like_torch(lambda: tt.tensor([1, 2]).add_(0.5), lambda: torch.tensor([1, 2]).add_(0.5),
                      "result type .* can't be cast to the desired output type")
    raises_like_torch(lambda: tt.tensor([True]).add_(1), lambda: torch.tensor([True]).add_(1),
                      "can't be cast")
    h, th = tt.ones(2, dtype=tt.float16), torch.ones(2, dtype=torch.float16)
    h.add_(tt.ones(2, dtype=tt.float64))
    th.add_(torch.ones(2, dtype=torch.float64))
    same(h, th)
    i, ti = tt.tensor([1, 2]), torch.tensor([1, 2])
    i.copy_(tt.tensor([2.7, -1.2]))  # copy_ and fill_ convert any dtype, as in torch
    ti.copy_(torch.tensor([2.7, -1.2]))
    same(i, ti)
    i.fill_(3.9)
    ti.fill_(3.9)
    same(i, ti)


# ------------------------------------------------------------------ 3. the version counter


def test_version_counter_counts_like_torch():
    x, t = pair(X)
    for step in (lambda a: a.add_(1), lambda a: a.mul_(2), lambda a: a.__setitem__(0, 1.0),
                 lambda a: a.zero_()):
        step(x)
        step(t)
        assert x._version == t._version
    y, ty = x.detach(), t.detach()
    v, tv = x[1], t[1]
    r, tr = x.reshape(6), t.reshape(6)
    y.add_(1)
    ty.add_(1)
    v.mul_(3)
    tv.mul_(3)
    assert x._version == t._version == y._version == v._version == r._version == tr._version
    fresh, tfresh = x + 1, t + 1
    assert fresh._version == tfresh._version == 0


@pytest.mark.parametrize("write", ["load_state_dict", "init"])
def test_writing_weights_between_forward_and_backward_is_caught_as_in_torch(write):
    """A state dict loaded (or an init run) into the weights a graph saved: backward must
    refuse, not compute the gradient with the new weights."""
    for lib in (tt, torch):
        model, other = lib.nn.Linear(3, 2), lib.nn.Linear(3, 2)
        y = model(lib.ones(4, 3, requires_grad=True))
        if write == "load_state_dict":
            model.load_state_dict(other.state_dict())
        else:
            lib.nn.init.zeros_(model.weight)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_backward_through_a_modified_saved_tensor_raises():
    msg = "modified by an inplace operation"
    for modify in (lambda y: y.add_(1), lambda y: y.__iadd__(1),
                   lambda y: setattr(y, "data", y.data + 1)):  # new memory: README, Differences
        x = tt.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()  # exp saves its output
        modify(y)
        with pytest.raises(RuntimeError, match=msg + r".*\[float32 \[2\]\] is at version 1; "
                                                      r"expected version 0"):
            y.sum().backward()
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = tx.exp()
    ty += 1
    with pytest.raises(RuntimeError, match=msg):
        ty.sum().backward()


def test_y_data_plus_one_is_unseen_by_autograd_as_in_torch():
    """``y.data += 1`` writes y's memory through ``.data``, outside autograd: exp's backward
    then uses the new output (e + 1), without an error, exactly as PyTorch's."""
    grads = []
    for lib in (tt, torch):
        x = lib.tensor([1.0], requires_grad=True)
        y = x.exp()
        y.data += 1
        assert y._version == 0
        y.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    np.testing.assert_allclose(grads[0], [np.e + 1], rtol=1e-6)


def test_modifying_through_a_view_or_detach_is_seen():
    x, tx = pair(X, requires_grad=True)
    for lib, a in ((tt, x), (torch, tx)):
        h = a * 1
        w = h.reshape(6) * h.reshape(6)  # saves views of h
        with lib.no_grad():
            h.detach()[0, 0] = 5.0  # writes h's memory through another tensor
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            w.sum().backward()


def test_optimizer_step_between_forward_and_backward_is_caught():
    lin, tlin = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    for model, lib, opt in ((lin, tt, tt.optim.SGD), (tlin, torch, torch.optim.SGD)):
        x = lib.tensor(X, requires_grad=True)  # so the weight is saved, for x's gradient
        loss = (model(x) * model(x)).sum()
        o = opt(model.parameters(), lr=0.1)
        for p in model.parameters():
            p.grad = lib.ones_like(p)
        o.step()  # changes the weight that the graph saved
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_unrelated_inplace_ops_do_not_disturb_backward():
    x, tx = pair(X, requires_grad=True)
    for a in (x, tx):
        y = a * 2  # mul saves the constant, not y
        y += 1
        y.mul_(2)
        (y * a).sum().backward()
    same(x.grad, tx.grad)


# ------------------------------------------------------------------ 4. set_grad_enabled


@pytest.mark.parametrize("lib", [tt, torch])
def test_set_grad_enabled_as_function_context_and_decorator(lib):
    x = lib.ones(2, requires_grad=True)
    with lib.set_grad_enabled(False):
        assert not lib.is_grad_enabled() and not (x * 2).requires_grad
    assert lib.is_grad_enabled() and (x * 2).requires_grad
    lib.set_grad_enabled(False)  # a plain call takes effect and stays
    try:
        assert not lib.is_grad_enabled()
        with lib.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not lib.is_grad_enabled()
    finally:
        lib.set_grad_enabled(True)

    @lib.set_grad_enabled(False)
    def evaluate():
        return x * 2

    assert lib.is_grad_enabled()  # decorating changes nothing
    assert not evaluate().requires_grad and lib.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with lib.set_grad_enabled(False):
            raise ZeroDivisionError
    assert lib.is_grad_enabled()


# ------------------------------------------------------------------ 7. max/min, view, index


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, False), (-1, True), (1, True)])
def test_max_min_with_dim_return_values_and_indices(name, dim, keepdim):
    data = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.5], [4.0, -1.0, 4.0]], np.float32)  # ties
    x, t = pair(data, requires_grad=True)
    out, ref = getattr(x, name)(dim, keepdim=keepdim), getattr(t, name)(dim, keepdim=keepdim)
    values, indices = out  # unpacks like a tuple
    assert out.values is values and out.indices is indices
    same(values, ref.values)
    same(indices, ref.indices)
    g = np.random.default_rng(0).standard_normal(tuple(ref.values.shape)).astype(np.float32)
    values.backward(tt.tensor(g))
    ref.values.backward(torch.tensor(g))
    same(x.grad, t.grad)  # the whole gradient goes to the chosen index, not shared by ties
    _, pred = getattr(tt, name)(tt.tensor(data), dim)
    same(pred, getattr(torch, name)(torch.tensor(data), dim)[1])


def test_max_forms_of_the_tutorials():
    out, ref = pair(X)
    _, predicted = tt.max(out, 1)
    same(predicted, torch.max(ref, 1)[1])
    same(out.max(1)[1], ref.max(1)[1])
    same(tt.max(out.data, 1).indices, torch.max(ref.data, 1).indices)  # .data: a Tensor
    same(tt.max(out.numpy(), 1).indices, torch.max(ref, 1).indices)  # an array is wrapped
    same(tt.max(out), torch.max(ref))
    same(out.min(), ref.min())
    same(tt.max(out, tt.zeros(2, 3)), torch.max(ref, torch.zeros(2, 3)))
    same(tt.argmin(out, 1), torch.argmin(ref, 1))
    same(out.argmax(dim=1, keepdim=True), ref.argmax(dim=1, keepdim=True))
    # printed as PyTorch's, one field a line (tests/test_ports10b.py compares the whole text)
    assert repr(out.max(1)).startswith("tinytrain.return_types.max(\nvalues=tensor(")


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dim", [(), 0, (0, 1), -1])
def test_amax_amin_share_gradients_among_ties(name, dim):
    data = np.array([[1.0, 3.0, 3.0], [3.0, -1.0, -1.0]], np.float32)
    x, t = pair(data, requires_grad=True)
    out, ref = getattr(tt, name)(x, dim), getattr(torch, name)(t, dim)
    same(out, ref)
    (out * tt.tensor(np.arange(1, out.numel() + 1, dtype=np.float32).reshape(out.shape))).sum()\
        .backward()
    (ref * torch.arange(1, ref.numel() + 1, dtype=torch.float32).reshape(ref.shape)).sum()\
        .backward()
    same(x.grad, t.grad)


def test_maximum_minimum_split_ties_like_torch():
    a, ta = pair([1.0, 2.0, 3.0], requires_grad=True)
    b, tb = pair([3.0, 2.0, 1.0], requires_grad=True)
    (tt.maximum(a, b) * 2 + tt.minimum(a, b)).sum().backward()
    (torch.maximum(ta, tb) * 2 + torch.minimum(ta, tb)).sum().backward()
    same(a.grad, ta.grad)
    same(b.grad, tb.grad)


VIEWS = [
    ("contiguous", lambda t: t, (4, 6)),
    ("T", lambda t: t.T, (24,)),
    ("T then split a dim", lambda t: t.T, (3, 2, 4)),
    ("column slice flatten", lambda t: t[:, :3], (12,)),
    ("column slice, split rows", lambda t: t[:, :3], (2, 2, 3)),
    ("column slice, add a dim", lambda t: t[:, :3], (4, 3, 1)),
    ("step slice", lambda t: t[::2], (12,)),
    ("permute 3-d", lambda t: t.reshape(2, 3, 4).permute(0, 2, 1), (2, 12)),
    ("permute 3-d, merge outer", lambda t: t.reshape(2, 3, 4).permute(1, 0, 2), (6, 4)),
]


@pytest.mark.parametrize("name,make,shape", VIEWS, ids=[v[0] for v in VIEWS])
def test_view_works_or_raises_exactly_when_torch_does(name, make, shape):
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    x, t = make(tt.tensor(data)), make(torch.tensor(data))
    assert x.is_contiguous() == t.is_contiguous()
    try:
        ref = t.view(shape)
    except RuntimeError:
        with pytest.raises(RuntimeError, match=r"view size is not compatible .*Use \.reshape"):
            x.view(shape)
        same(x.reshape(shape), t.reshape(shape))
        return
    out = x.view(shape)
    same(out, ref)
    with tt.no_grad():
        out.fill_(-1.0)  # a view: writes show through
    assert (x.numpy() == -1).all()
    c = x.contiguous()
    assert c.is_contiguous() and (c is x) == t.is_contiguous()


def test_view_as_squeeze_unsqueeze_size():
    x, t = pair(np.zeros((2, 1, 3), np.float32))
    same(x.squeeze(), t.squeeze())
    same(x.squeeze(1), t.squeeze(1))
    same(x.squeeze(0), t.squeeze(0))
    same(x.unsqueeze(-1), t.unsqueeze(-1))
    same(x.unsqueeze(0), t.unsqueeze(0))
    assert x.size(-1) == t.size(-1) == 3 and x.size() == tuple(t.size())
    pred = tt.zeros(4, 1)
    assert tt.tensor([1, 2, 3, 4]).view_as(pred).shape == (4, 1)
    assert tt.zeros(2, 6).reshape_as(tt.zeros(3, 4)).shape == (3, 4)


def test_basic_index_backward_uses_a_plain_add_and_advanced_uses_add_at(monkeypatch):
    from tinytrain.autograd import ops

    calls = []
    real = ops.index_add
    monkeypatch.setattr(ops, "index_add", lambda *a: (calls.append(1), real(*a)))
    x, t = pair(np.arange(12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    for index in [(1,), (slice(None), 2), (slice(0, 3, 2), slice(1, None)), (Ellipsis, 0),
                  (None, 1, slice(None, None, -1))]:
        (x[index] * 2).sum().backward()
        if index[-1] != slice(None, None, -1):  # torch has no negative steps
            (t[index] * 2).sum().backward()
    assert calls == []
    idx = np.array([0, 2, 0])  # repeated: the two gradients must add up
    (x[idx] * 3).sum().backward()
    (t[torch.tensor(idx)] * 3).sum().backward()
    assert calls == [1]
    flip = np.zeros((3, 4), np.float32)
    flip[1, ::-1] += 2
    np.testing.assert_allclose(x.grad.numpy() - flip, t.grad.numpy())


@pytest.mark.cuda
@pytest.mark.skipif(not tt.cuda_is_available(), reason="needs CuPy and an NVIDIA GPU")
def test_tensor_of_a_cupy_array_stays_on_the_gpu():
    import cupy

    a = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    x = tt.tensor(a)
    assert x.device == "cuda" and isinstance(x._data, cupy.ndarray)
    assert (x + tt.ones(2, 3, device="cuda")).device == "cuda"  # the next op works
    assert tt.tensor(a, device="cpu").device == "cpu"
    assert tt.as_tensor(a)._data is a


def test_tensor_device_defaults_to_where_the_data_is():
    assert tt.tensor(np.ones(2)).device == "cpu" and tt.tensor([1.0]).device == "cpu"
    assert tt.tensor(np.ones(2), device=tt.device("cpu")).device == tt.device("cpu")


# --------------------------------------------------------------------------- a review's client
# programs against PyTorch: each case was a wrong number or a raw NumPy error before


def _grad_after(lib, steps):
    x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    steps(x * 1)
    return x.grad.tolist()


@pytest.mark.parametrize("steps", [
    lambda y: (lambda v: (y.mul_(2), (v * 3).sum().backward()))(y[0:2]),
    lambda y: (lambda v, w: (v.mul_(5), w.sum().backward()))(y[0:2], y[1:3]),
    lambda y: (lambda v: (y.mul_(2), v.add_(1), y.sum().backward()))(y[0:2]),
    lambda y: (lambda v: (y.mul_(3), (v * v).sum().backward()))(y.reshape(2, 2)),
    lambda y: (lambda v: (y[1:].mul_(3), (v * 2).sum().backward()))(y.reshape(2, 2)[0]),
], ids=["view-then-base", "sibling-views", "stale-view-written", "reshape", "view-of-view"])
def test_a_view_made_before_an_in_place_write_sees_it_in_its_gradient(steps):
    """PyTorch regenerates a view's grad_fn when its base is written after the view was
    made; tinytrain's views kept the old node and gave silently wrong gradients."""
    assert _grad_after(tt, steps) == _grad_after(torch, steps)


@pytest.mark.parametrize("index", [
    (0, None, [1, 0]), (0, slice(None), [1, 0], None), (slice(1, None), 0, None, [[0], [1]]),
    (None, 0, [1, 0]), (0, slice(None), [1, 2]), (1, Ellipsis, [0, 1]),
])
def test_integer_and_array_indices_read_and_write_in_pytorch_order(index):
    data = np.arange(120.0).reshape(3, 4, 5, 2)
    ours, theirs = tt.tensor(data), torch.tensor(data)
    got, want = ours[index], theirs[index]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    value = np.arange(float(want.numel())).reshape(tuple(want.shape)) + 1000
    ours[index] = tt.tensor(value)
    theirs[index] = torch.tensor(value)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_integer_results_are_not_differentiable():
    x = tt.tensor([1.5, 2.5], requires_grad=True)
    for y in (x.long(), x.int(), x.bool(), x.argmax(0)):
        assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x.long().float() * 3).sum().backward()
    z = tt.zeros(3, dtype=tt.int64)
    z[0:2] = x * 2
    assert not z.requires_grad and z.tolist() == [3, 5, 0]


def test_std_of_equal_values_has_a_zero_gradient_like_torch():
    for unbiased in (True, False):
        grads = []
        for lib in (tt, torch):
            x = lib.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]], requires_grad=True)
            x.std(1, unbiased=unbiased).sum().backward()
            grads.append(np.asarray(x.grad.tolist()))
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
        assert not np.isnan(grads[0]).any()


@pytest.mark.parametrize("op", [
    lambda t: t.sum(dim=()), lambda t: t.sum(dim=[]), lambda t: t.mean(dim=()),
    lambda t: t.var(dim=()),
])
def test_an_empty_dim_list_reduces_every_dim_like_torch(op):
    data = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(op(tt.tensor(data)).item(), op(torch.tensor(data)).item())


@pytest.mark.parametrize("op", [
    lambda t: t.sum(0), lambda t: t.sum(-1), lambda t: t.mean(0), lambda t: t.amax(-1),
    lambda t: t.max(0)[0], lambda t: t.max(-1)[1], lambda t: t.argmax(0, keepdim=True),
    lambda t: t.softmax(-1), lambda t: t.log_softmax(0), lambda t: t.logsumexp(0),
    lambda t: t.transpose(0, 0), lambda t: t.var(0, unbiased=False),
])
def test_a_0d_tensor_takes_dim_0_and_minus_1_like_torch(op):
    ours, theirs = op(tt.tensor(2.0)), op(torch.tensor(2.0))
    assert tuple(ours.shape) == tuple(theirs.shape) == ()
    assert float(ours.item()) == float(theirs.item())
    with pytest.raises(IndexError):
        tt.tensor(2.0).sum(1)


def test_empty_dims_give_empty_softmax_and_minus_inf_logsumexp_like_torch():
    x = np.zeros((2, 0), np.float32)
    assert tt.tensor(x).softmax(1).shape == (2, 0) == tuple(torch.tensor(x).softmax(1).shape)
    assert tt.tensor(x).logsumexp(1).tolist() == torch.tensor(x).logsumexp(1).tolist()


@pytest.mark.parametrize("call, error", [
    (lambda: tt.zeros((2, 3)).sum((1, -1)), "appears more than once"),
    (lambda: tt.zeros((2, 3)).flip(0, 0), "appears more than once"),
    (lambda: tt.zeros((2, 3, 4)).transpose(0, 4), "out of range"),
    (lambda: tt.ones(2).repeat(2, -1), "must be >= 0"),
    (lambda: tt.eye(-1), "must be >= 0"),
    (lambda: tt.arange(0, 5, 0), "inconsistent"),
    (lambda: tt.arange(0, 5, -1), "inconsistent"),
    (lambda: tt.tensor([[1, 2], [3]]), "different lengths"),
    (lambda: tt.randn(3, dtype=tt.int64), "floating point dtype"),
    (lambda: tt.rand_like(tt.zeros(2, dtype=tt.int64)), "floating point dtype"),
    (lambda: tt.ones(3).expand(2, 3).add_(1), "more than one element"),
    (lambda: tt.ones(3).expand(2, 3).__setitem__(0, 5.0), "more than one element"),
])
def test_bad_arguments_get_clear_errors_not_numpy_tracebacks(call, error):
    with pytest.raises((ValueError, RuntimeError, IndexError, TypeError), match=error):
        call()


def test_assigned_grads_are_checked_and_backward_takes_a_list():
    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(ValueError, match="different size"):
        x.grad = tt.zeros(1)
    (x * 2).backward(gradient=[1.0, 1.0, 1.0])
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("steps", [
    lambda lib, s: (lambda buf: (lambda row: (buf.__setitem__(1, s * 2),
                                              ((row * 10).sum() + s.sum()).backward()))(buf[1]))(
        lib.zeros(2, 3)),
    lambda lib, s: (lambda b: (lambda v: (b.mul_(s), v.sum().backward()))(b[0]))(lib.ones(2, 3)),
    lambda lib, s: (lambda b: (lambda v, w: (w.copy_(s * 3), (v * v).sum().backward()))(
        b.reshape(6), b[1]))(lib.zeros(2, 3)),
], ids=["setitem", "mul_", "through-a-sibling"])
def test_a_view_of_a_base_without_grad_follows_a_write_that_brings_grad(steps):
    """A view of a tensor with no graph, taken before a write of a value that requires grad:
    PyTorch's view then requires grad too; tinytrain's kept no graph (s.grad missed it)."""
    grads = []
    for lib in (tt, torch):
        s = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        steps(lib, s)
        grads.append(s.grad.tolist())
    assert grads[0] == grads[1]


def test_writing_with_grad_through_a_view_made_under_no_grad_is_refused_like_torch():
    x = tt.ones((3, 2), requires_grad=True)
    b = x * 1
    with tt.no_grad():
        v = b[1]
    with pytest.raises(RuntimeError, match="created in no_grad mode and is being modified"):
        v.mul_(tt.tensor([2.0, 3.0], requires_grad=True))
    with tt.no_grad():
        v.mul_(2)  # without grad it is an ordinary write
    assert b[1].tolist() == [2.0, 2.0]


@pytest.mark.parametrize("x, lo, hi", [
    ([-1.0, 0.5, 2.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),
    ([0.5, -2.0, 3.0], np.zeros((2, 3)), None),
    ([0.5, 1.0, 2.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]),  # ties
    ([0.5, -2.0, 3.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),  # min > max: max wins
    (np.linspace(-2, 2, 6).reshape(2, 3), [[-1.0, 0.0, 1.0]], [[0.5], [1.5]]),
])
def test_clamp_with_tensor_bounds_differentiates_every_operand_like_torch(x, lo, hi):
    results = []
    for lib in (tt, torch):
        t = lib.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
        bounds = [None if b is None else lib.tensor(np.asarray(b, dtype=np.float64),
                                                    requires_grad=True) for b in (lo, hi)]
        y = t.clamp(*bounds)
        weights = lib.tensor(np.arange(1.0, y.numel() + 1).reshape(tuple(y.shape)))
        (y * weights).sum().backward()
        results.append([y.tolist(), t.grad.tolist()] + [None if b is None else b.grad.tolist()
                                                         for b in bounds])
    assert results[0] == results[1]


def test_flatten_with_start_and_end_on_one_dim_like_torch():
    for shape, args in (((3,), ()), ((4, 5), (1,)), ((), ()), ((2, 3, 4), (2,))):
        data = np.zeros(shape, np.float32)
        want = tuple(torch.tensor(data).flatten(*args).shape)
        assert tt.tensor(data).flatten(*args).shape == want
    assert nn.Flatten()(tt.zeros((4, 5))).shape == (4, 5)


@pytest.mark.parametrize("between", ["no_grad read", "custom Function"])
def test_a_view_read_without_grad_after_a_write_keeps_its_place_in_the_graph(between):
    """A view's node is remade only with grad enabled: a read under no_grad (logging, a
    ctx-style Function's forward) must not cut it from the graph for good."""
    grads = []
    for lib in (tt, torch):
        a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x = a * 1
        v = x[1:]
        x.mul_(2)
        if between == "no_grad read":
            with lib.no_grad():
                v.sum()
        else:
            class Double(lib.autograd.Function):
                @staticmethod
                def forward(ctx, t):
                    return t * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

            v = Double.apply(v)
        ((v * v).sum() + x.sum()).backward()
        grads.append(a.grad.tolist())
    assert grads[0] == grads[1]


def test_a_views_requires_grad_follows_its_base_joining_a_graph_like_torch():
    flags = []
    for lib in (tt, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        d = (x * 1).detach()
        v = d[1]
        d.mul_(lib.tensor([2.0, 2.0, 2.0], requires_grad=True))
        flags.append((d.requires_grad, v.requires_grad))
    assert flags[0] == flags[1] == (True, True)


# ------------------------------------------------------------------ fifth review round


def test_backward_through_a_write_into_a_0d_tensor_like_torch():
    for lib in (tt, torch):
        x = lib.tensor(2.0, requires_grad=True)
        y = x * 1
        y[...] = 5.0
        (y * 3).backward()
        assert float(x.grad) == 0.0


@pytest.mark.parametrize("values,op", [([1.0, np.nan, 3.0], "max"), ([1.0, np.nan, np.nan], "min"),
                                       ([np.nan, 2.0, 2.0], "max")])
def test_max_min_of_nan_give_the_gradient_to_the_nans_like_torch(values, op):
    ours, theirs = pair(values, requires_grad=True)
    getattr(ours, op)().backward()
    getattr(theirs, op)().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.parametrize("p", [0.5, 1, 1.5, 2, 3, np.inf, -1, -2.5])
@pytest.mark.parametrize("values", [[0.0, 1.0, -2.0], [0.0, 0.0, 0.0], [[0.5, -1.0], [0.0, 3.0]]])
@pytest.mark.parametrize("dim", [None, 0, -1])
def test_norm_and_its_gradient_at_zeros_like_torch(p, values, dim):
    ours, theirs = pair(np.asarray(values, dtype=np.float64), requires_grad=True)
    a, b = ours.norm(p=p, dim=dim), theirs.norm(p=p, dim=dim)
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12)
    g = np.arange(1, a.numel() + 1, dtype=np.float64).reshape(a.shape)
    (a * tt.tensor(g)).sum().backward()
    (b * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name,kwargs", [("smooth_l1_loss", {"beta": 1.0}),
                                         ("smooth_l1_loss", {"beta": 0.5}),
                                         ("huber_loss", {"delta": 2.0})])
def test_smooth_l1_and_huber_of_infinite_differences_have_finite_gradients(name, kwargs):
    x = [np.inf, -np.inf, 0.3, -0.7, 2.0, -5.0, 0.5, -1.0]
    ours, theirs = pair(np.asarray(x, dtype=np.float64), requires_grad=True)
    a = getattr(nn.functional, name)(ours, tt.zeros(8, dtype=tt.float64), reduction="none",
                                     **kwargs)
    b = getattr(torch.nn.functional, name)(theirs, torch.zeros(8, dtype=torch.float64),
                                           reduction="none", **kwargs)
    np.testing.assert_array_equal(a.numpy(), b.detach().numpy())
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.parametrize("case", [
    lambda L: L.zeros(2, 3).argmax(keepdim=True),
    lambda L: L.zeros(2, 3).argmin(keepdim=True),
    lambda L: L.tensor([True, False]).square(),
    lambda L: L.stack(L.zeros(0, 2).chunk(3)),
    lambda L: L.zeros(3).masked_fill(L.tensor([[True], [False]]), 1.0),
    lambda L: L.zeros(1, 0, 1).unflatten(2, (-1, 1)),
    lambda L: L.arange(6).unflatten(0, (2, -1)),
    lambda L: L.tensor(1.0).any(-1),
    lambda L: L.tensor(0.0).all(0),
    lambda L: L.tensor(3.0).norm(dim=0),
    lambda L: L.tensor(1.0).cumsum(-1),
    lambda L: L.tensor(3.0).movedim(0, -1),
    lambda L: L.zeros(0, dtype=L.int64) // 0,
    lambda L: L.tensor([[]], dtype=L.int64) % L.tensor([0]),
], ids=["argmax", "argmin", "square-bool", "chunk-empty", "masked_fill-broadcast",
        "unflatten-empty", "unflatten", "any-0d", "all-0d", "norm-0d", "cumsum-0d",
        "movedim-0d", "floordiv-empty", "remainder-empty"])
def test_edge_cases_the_fuzzer_found_give_torchs_result(case):
    same(case(tt), case(torch))


@pytest.mark.parametrize("case,match", [
    (lambda L: L.outer(L.ones(2, 3), L.ones(3)), "1-D"),
    (lambda L: L.zeros(6).unflatten(0, (4, -1)), "unflatten"),
    (lambda L: L.cat([L.tensor(1.0), L.tensor(2.0)]), "zero-dimensional tensor"),
    (lambda L: L.tensor([1, 2]) // 0, "ZeroDivisionError"),
    (lambda L: L.zeros(3).masked_fill_(L.tensor([[True], [False]]), 1.0), "masked_fill_"),
])
def test_edge_cases_the_fuzzer_found_raise_like_torch(case, match):
    with pytest.raises((RuntimeError, ValueError)):
        case(torch)
    with pytest.raises((RuntimeError, ValueError), match=match):
        case(tt)


@pytest.mark.parametrize("dim", [1.0, (0, 1.5), True, "0"])
def test_a_dim_that_is_not_an_int_is_a_type_error(dim):
    with pytest.raises(TypeError):
        torch.zeros(2, 3).sum(dim)
    with pytest.raises(TypeError, match="dim must be an int or a sequence of ints"):
        tt.zeros(2, 3).sum(dim)


def test_writing_a_size_1_value_and_a_wrong_shape_like_torch():
    ours, theirs = tt.zeros(2, 3), torch.zeros(2, 3)
    ours[-1, 0] = tt.tensor([7.0])
    theirs[-1, 0] = torch.tensor([7.0])
    ours[0] = tt.tensor([[1.0, 2.0, 3.0]])
    theirs[0] = torch.tensor([[1.0, 2.0, 3.0]])
    same(ours, theirs)
    for grad in (False, True):
        x = tt.zeros(2, 3, requires_grad=grad) * 1
        with pytest.raises(ValueError, match=r"value of shape \(2,\) does not broadcast to the "
                                             r"\(3,\) indexed \(tensor shape \(2, 3\)\)"):
            x[0] = tt.zeros(2)
    v = tt.ones(1, 3, requires_grad=True)
    x = tt.zeros(2, 3, requires_grad=True)
    y = x * 1
    y[1] = v
    y.sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), np.ones((1, 3)))


def test_integer_floor_division_of_shapes_that_do_not_broadcast_names_them():
    for op in (lambda a, b: a // b, lambda a, b: a % b,
               lambda a, b: a.div(b, rounding_mode="floor")):
        with pytest.raises(RuntimeError, match=r"\(3,\) and \(2,\) cannot be broadcast"):
            op(tt.tensor([1, 2, 3]), tt.tensor([1, 2]))


def test_outer_of_lists_and_ops_along_a_dim_of_a_0d_tensor():
    np.testing.assert_array_equal(tt.outer([1.0, 2.0], [3.0, 4.0]).numpy(), [[3, 4], [6, 8]])
    scalar = tt.tensor(2.0)
    for call in (lambda: scalar.size(-1), lambda: scalar.chunk(2, -1),
                 lambda: scalar.narrow(0, 0, 1), lambda: scalar.unbind(-1)):
        # (gather along dim 0/-1 of a 0-d tensor works in PyTorch: test_torch_idioms.py)
        with pytest.raises(IndexError, match="but the tensor has no dimensions"):
            call()


def test_sort_argsort_topk_of_a_0d_tensor_like_torch():
    for lib in (tt, torch):
        x = lib.tensor(3.0)
        values, indices = x.sort()
        assert float(values) == 3.0 and int(indices) == 0 and int(x.argsort()) == 0
        assert float(x.topk(1).values) == 3.0


def test_a_setitem_through_a_no_grad_view_of_a_graph_is_refused_like_torch():
    for lib in (tt, torch):
        a = lib.ones(3, requires_grad=True)
        x = a * 2
        with lib.no_grad():
            v = x[:2]
        with pytest.raises(RuntimeError, match="(?i)no_grad mode"):
            v[0] = 0.0


def test_float16_reductions_accumulate_in_float32_like_torch():
    for make in (lambda L: L.tensor([0.0, 1e4], dtype=L.float16).std(),
                 lambda L: L.tensor([0.0, 1e4], dtype=L.float16).var(),
                 lambda L: L.tensor([200.0, 300.0], dtype=L.float16).norm(),
                 lambda L: L.ones(3000, dtype=L.float16).cumsum(0)[-1]):
        ours, theirs = make(tt), make(torch)
        assert ours.dtype == tt.float16
        np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-3)


@pytest.mark.parametrize("call", [
    lambda L: L.zeros(2, dtype=L.uint8).fill_(300),
    lambda L: L.tensor([0, 200], dtype=L.uint8).clamp(min=300),
    lambda L: L.zeros(2, dtype=L.int32).fill_(1e10),
    lambda L: L.zeros(2, dtype=L.int64).masked_fill(L.tensor([True, False]), float("nan")),
    lambda L: L.full((2,), float("nan"), dtype=L.int64),
    lambda L: L.zeros(2).fill_(1e300),
], ids=["fill-300-uint8", "clamp-300-uint8", "fill-1e10-int32", "masked_fill-nan-int64",
        "full-nan-int64", "fill-1e300-float32"])
def test_a_number_the_dtype_cannot_hold_is_refused_like_torch(call):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(RuntimeError, match="cannot be converted to type"):
        call(tt)


def test_negative_ints_wrap_into_uint8_like_torch():
    x = [0, 1, 200]
    m = [True, False, True]
    for make in (lambda L: L.tensor([-1, 3], dtype=L.uint8),
                 lambda L: L.full((2,), -1, dtype=L.uint8),
                 lambda L: L.full((2,), L.tensor(-1), dtype=L.uint8),
                 lambda L: L.tensor(x, dtype=L.uint8).clamp(min=-1),
                 lambda L: L.tensor(x, dtype=L.uint8).clamp(min=-255),
                 lambda L: L.tensor(x, dtype=L.uint8).fill_(-1),
                 lambda L: L.tensor(x, dtype=L.uint8).masked_fill(L.tensor(m), -1),
                 lambda L: L.where(L.tensor(m), L.tensor(x, dtype=L.uint8), -1),
                 lambda L: L.where(L.tensor([True, False]), L.tensor([1.0, 2.0],
                                                                     dtype=L.float16), -1e9)):
        assert make(tt).tolist() == make(torch).tolist()
    for refused in (lambda L: L.tensor(x, dtype=L.uint8).clamp(min=-256),
                    lambda L: L.where(L.tensor(m), L.tensor(x, dtype=L.uint8), 300),
                    lambda L: L.tensor([-1, 300], dtype=L.uint8),
                    lambda L: L.tensor(2**63),
                    lambda L: L.full((2,), 300, dtype=L.uint8),
                    lambda L: L.tensor(x, dtype=L.uint8).fill_(-0.5),
                    lambda L: L.tensor(x, dtype=L.uint8).fill_(255.9)):
        with pytest.raises((RuntimeError, ValueError)):
            refused(torch)
        with pytest.raises(RuntimeError, match="without overflow"):
            refused(tt)
    ours = tt.zeros(2, dtype=tt.uint8)
    ours[0] = -1
    assert ours.tolist() == [255, 0]


def test_sum_dtype_formatting_and_empty_repr_like_torch():
    for lib in (tt, torch):
        assert str(lib.tensor([1, 2]).sum(dtype=lib.int32).dtype).endswith("int32")
        assert bool(lib.tensor([1, 2]).sum(dtype=lib.bool)) is True
        assert f"{lib.tensor(2.5):.2f}" == "2.50" and f"{lib.tensor(2.5)}" == "2.5"
        assert repr(lib.zeros(2, 0)) == "tensor([], size=(2, 0))"


def _retained_view_program(lib, kind):
    a = lib.tensor(np.arange(6.0).reshape(2, 3) + 1, requires_grad=True)
    weights = lib.tensor(np.arange(6.0).reshape(2, 3) + 1)
    b = a * 2
    if kind == "view written, base used too":
        v = b.view(2, 3)
        v.retain_grad()
        v.mul_(3)
        ((v * weights).sum() + (b * weights).sum()).backward()
    elif kind == "base written after retain_grad":
        v = b.reshape(6)
        v.retain_grad()
        b.mul_(3)
        (v * weights.reshape(6)).sum().backward()
    elif kind == "a sibling view written":
        v, s = b.T, b.view(6)
        v.retain_grad()
        s.add_(1)
        (v * weights.T).sum().backward()
    else:  # "view written, not used after"
        v = b.T
        v.retain_grad()
        v.add_(1)
        (b * weights).sum().backward()
    return v.retains_grad, None if v.grad is None else v.grad.tolist(), a.grad.tolist()


@pytest.mark.parametrize("kind", ["view written, base used too", "base written after retain_grad",
                                  "a sibling view written", "view written, not used after"])
def test_retain_grad_on_a_view_follows_writes_through_it_and_its_base_like_torch(kind):
    """A retained view's .grad was lost (None) after a write through its base or a sibling,
    and counted the base's other uses after a write through the view itself."""
    assert _retained_view_program(tt, kind) == _retained_view_program(torch, kind)


def _view_of_a_view_program(lib, write):
    a = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = a * 1
    v = b[0]
    v.retain_grad()
    w = v[1:]
    u = w.unsqueeze(0)
    u.retain_grad()
    z = u.squeeze(0)
    {"base": lambda: b.mul_(2), "v": lambda: v.mul_(2), "w": lambda: w.add_(1),
     "z": lambda: z.add_(1), "none": lambda: None}[write]()
    ((z * 3).sum() + (v * 5).sum() + (w * 7).sum() + (u * 11).sum()).backward()
    return [t.tolist() for t in (a.grad, v.grad, u.grad)]


@pytest.mark.parametrize("write", ["none", "base", "v", "w", "z"])
def test_views_of_views_made_again_after_a_write_hang_from_the_root_base_like_torch(write):
    """After a write, a view w of a retained view v was made again from v, so v.grad counted
    w's uses ([5, 26, 26] where PyTorch gives [5, 5, 5]); PyTorch makes it from the base."""
    assert _view_of_a_view_program(tt, write) == _view_of_a_view_program(torch, write)


def test_a_refused_write_on_a_view_of_an_expand_changes_nothing_like_torch():
    """The view's graph was rewired before the refusal: a later backward gave a.grad
    [0, 0, 0] where PyTorch gives [2, 2, 2]."""
    grads = []
    for lib in (tt, torch):
        a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        v = (a * 1).expand(2, 3).T
        with pytest.raises(RuntimeError):
            v.mul_(0)
        v.sum().backward()
        grads.append(a.grad.tolist())
    assert grads[0] == grads[1] == [2.0, 2.0, 2.0]


def test_a_write_through_a_view_made_before_its_base_joined_a_graph_is_recorded():
    """row = out[0]; out[0] = x; row[2] = 5.0: the gradient ignored the write (x.grad
    [1, 1, 1, 1] where PyTorch gives [1, 1, 0, 1])."""
    grads = []
    for lib in (tt, torch):
        x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        out = lib.zeros(2, 4)
        row = out[0]
        out[0] = x
        row[2] = 5.0
        out.sum().backward()
        grads.append((out.tolist(), x.grad.tolist()))
    assert grads[0] == grads[1]


def test_the_stride_of_an_axis_added_with_none_is_pytorchs():
    """x[None].stride() was (0, 3, 1) (NumPy's step for a new axis); PyTorch says (6, 3, 1)."""
    for index in ((None,), (slice(None), None), (Ellipsis, None), (None, None)):
        assert tt.ones(2, 3)[index].stride() == torch.ones(2, 3)[index].stride()


# ------------------------------------------------------------------ unfold and diagonal views

_UNFOLDS = [(2, 2, 1), (2, 2, 3), (-1, 4, 1), (1, 3, 1), (0, 1, 2), (2, 0, 1), (1, 2, 2)]


@pytest.mark.parametrize("dim,size,step", _UNFOLDS)
def test_unfold_is_pytorchs_view_with_its_gradient(dim, size, step, device):
    """Windows along ``dim``, the window last; overlapping windows sum their gradients."""
    data = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    ours = tt.tensor(data, device=device, requires_grad=True)
    theirs = torch.tensor(data, requires_grad=True)
    u, tu = ours.unfold(dim, size, step), theirs.unfold(dim, size, step)
    same(u, tu)
    assert u.stride() == tu.stride() and u._version == ours._version
    weights = np.arange(tu.numel(), dtype=np.float32).reshape(tuple(tu.shape))
    (u * tt.tensor(weights, device=device)).sum().backward()
    (tu * torch.tensor(weights)).sum().backward()
    same(ours.grad, theirs.grad)


def test_unfold_writes_through_and_refuses_what_pytorch_refuses():
    for lib in (tt, torch):
        y = lib.arange(6.0)
        y.unfold(0, 2, 2)[1].fill_(7.0)    # windows that do not overlap: a writable view
        assert y.tolist() == [0.0, 1.0, 7.0, 7.0, 4.0, 5.0]
        assert lib.tensor(5.0).unfold(0, 1, 1).tolist() == [5.0]
        assert lib.zeros(3, 0).unfold(1, 0, 1).shape == (3, 1, 0)
    x, tx = pair(np.zeros((2, 3, 4), np.float32))
    for args, match in [((2, 5, 1), "maximum size for tensor at dimension 2 is 4 but size is 5"),
                        ((2, 2, 0), "step is 0 but must be > 0"),
                        ((2, 2, -1), "step is -1 but must be > 0"),
                        ((2, -1, 1), "size is -1 but must be >= 0")]:
        raises_like_torch(lambda a=args: x.unfold(*a), lambda a=args: tx.unfold(*a), match)
    for lib_x in (x, tx):
        with pytest.raises(IndexError):
            lib_x.unfold(3, 2, 1)
        with pytest.raises(TypeError, match="'size'"):
            lib_x.unfold(0, 1.5, 1)
    with pytest.raises(RuntimeError, match="single memory location"):
        x.unfold(2, 2, 1).fill_(0.0)       # overlapping windows: an element written twice


def test_an_in_place_op_with_autograd_on_unfold_windows_reaches_the_base_like_torch():
    grads = []
    for lib in (tt, torch):
        a = lib.arange(6.0, requires_grad=True)
        h = a * 1
        h.unfold(0, 2, 2)[:, 1].mul_(3.0)
        (h * h).sum().backward()
        grads.append((h.tolist(), a.grad.tolist()))
    assert grads[0] == grads[1]


_DIAGONALS = [((3, 4), ()), ((3, 4), (1,)), ((3, 4), (-1,)), ((3, 4), (5,)), ((3, 4), (-4,)),
              ((3, 4), (0, 1, 0)), ((3, 4), (2, -1, -2)), ((2, 3, 4), (1, 0, 2)),
              ((2, 3, 4), (-1, 2, 1)), ((2, 3, 4), (0, 1, 2))]


@pytest.mark.parametrize("shape,args", _DIAGONALS)
def test_diagonal_is_pytorchs_view_with_its_gradient(shape, args, device):
    data = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    ours = tt.tensor(data, device=device, requires_grad=True)
    theirs = torch.tensor(data, requires_grad=True)
    d, td = ours.diagonal(*args), theirs.diagonal(*args)
    same(d, td)
    same(tt.diagonal(ours, *args), torch.diagonal(theirs, *args))
    assert d.stride() == td.stride()
    weights = np.arange(1, td.numel() + 1, dtype=np.float32).reshape(tuple(td.shape))
    (d * tt.tensor(weights, device=device)).sum().backward()
    (td * torch.tensor(weights)).sum().backward()
    same(ours.grad, theirs.grad)


def test_writes_through_a_diagonal_reach_the_base_like_torch(device):
    results = []
    for lib, dev in ((tt, device), (torch, "cpu")):
        m = lib.arange(12.0, device=dev).reshape(3, 4)
        m.diagonal().fill_(0.0)
        d = m.diagonal(1)
        d += 1                                     # a leaf that requires no grad
        w = lib.ones(3, 3, device=dev, requires_grad=True)
        with lib.no_grad():
            w.diagonal().mul_(5.0)                 # under no_grad, a parameter's diagonal
        a = lib.arange(9.0, device=dev, requires_grad=True)
        h = a.reshape(3, 3) * 1
        h.diagonal(-1).mul_(5.0)                   # with autograd: the base's graph records it
        (h * h).sum().backward()
        results.append((m.cpu().tolist(), d.cpu().tolist(), w.cpu().tolist(),
                        a.grad.cpu().tolist()))
    assert results[0] == results[1]


def test_diagonal_diag_embed_and_diag_refuse_and_compute_like_torch():
    m, tm = pair(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    raises_like_torch(lambda: m.diagonal(0, 0, 0), lambda: tm.diagonal(0, 0, 0),
                      "diagonal dimensions cannot be identical 0, 0")
    for bad in (lambda L: L.tensor(1.0).diagonal(), lambda L: L.arange(3.0).diagonal(),
                lambda L: L.ones(2, 3).diagonal(0, 0, 2)):
        for lib in (tt, torch):
            with pytest.raises(IndexError):
                bad(lib)
    v = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    for args in [(), (1,), (-1, 0, 1), (0, 0, 2), (2, -1, 0)]:
        ours, theirs = tt.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
        e, te = tt.diag_embed(ours, *args), torch.diag_embed(theirs, *args)
        same(e, te)
        same(ours.diag_embed(*args), te)
        g = np.arange(te.numel(), dtype=np.float32).reshape(tuple(te.shape))
        (e * tt.tensor(g)).sum().backward()
        (te * torch.tensor(g)).sum().backward()
        same(ours.grad, theirs.grad)
    raises_like_torch(lambda: tt.diag_embed(tt.tensor(v), 0, 0, 0),
                      lambda: torch.diag_embed(torch.tensor(v), 0, 0, 0), "cannot be identical")
    for k in (0, 1, -2):
        same(tt.diag(tt.tensor(v[0]), k), torch.diag(torch.tensor(v[0]), k))
        same(tt.diag(m, k), torch.diag(tm, k))
    copy = tt.diag(m)
    copy.fill_(0.0)  # tt.diag of a matrix is a copy, as torch.diag
    assert m.tolist() == tm.tolist()
    raises_like_torch(lambda: tt.diag(tt.ones(2, 2, 2)), lambda: torch.diag(torch.ones(2, 2, 2)),
                      "Supports 1D or 2D tensors. Got 3D")
