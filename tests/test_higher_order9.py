"""Higher-order gradients (``create_graph=True``) against PyTorch, in float64 and float32:
n-th derivatives, Hessians and Hessian-vector products, WGAN-GP's gradient penalty on a
Linear and a Conv2d critic, a MAML step, ``autograd.functional``, what the intermediate
gradients carry (``requires_grad``, ``grad_fn``), the errors, and ``retain_graph``'s default.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF  # noqa: N812

import tinytrain as tt
import tinytrain.nn.functional as F  # noqa: N812

DTYPES = [(tt.float64, torch.float64, 1e-10), (tt.float32, torch.float32, 2e-4)]
RNG = np.random.default_rng(9)


def lib(m):
    """(module, functional) of tinytrain or torch."""
    return (tt, F) if m is tt else (torch, TF)


def leaf(m, values, dtype, device="cpu", requires_grad=True):
    if m is tt:
        return tt.tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)
    return torch.tensor(values, dtype=dtype, requires_grad=requires_grad)


def assert_close(ours, theirs, tol):
    ours = ours.detach().cpu().numpy() if hasattr(ours, "detach") else ours
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


def derivatives(m, f, x, order):
    """d^k f / dx^k (elementwise f, summed) for k = 1..order, by grad(create_graph=True)."""
    out, y = [], f(m, x).sum()
    for _ in range(order):
        (y,) = m.autograd.grad(y, x, create_graph=True)
        out.append(y)
        y = y.sum()
    return out


SCALAR_FUNCTIONS = {
    "quartic": lambda m, x: x ** 4 - 2 * x ** 2,  # DeZero's Newton example
    "sin": lambda m, x: x.sin(),
    "cos_exp": lambda m, x: x.cos() * x.exp(),
    "tanh": lambda m, x: x.tanh(),
    "sigmoid_log": lambda m, x: x.sigmoid() * (x * x + 1).log(),
    "sqrt_div": lambda m, x: (x * x + 2).sqrt() / (x + 3),
    "pow_tensor": lambda m, x: (x * x + 1) ** (x.sin() + 2),
    "relu_abs_leaky": lambda m, x: (x.relu() ** 3 + x.abs() ** 3
                                   + lib(m)[1].leaky_relu(x, 0.1) ** 2 * x),
    "clamp_where": lambda m, x: m.where(x > 0, x ** 3, -x * x) + x.clamp(-1.0, 1.0) ** 2,
    "neg_sub_mean": lambda m, x: -(x - x.mean()) ** 3,
    "elu_softplus": lambda m, x: lib(m)[1].elu(x) ** 2 + lib(m)[1].softplus(x) * x,
}


@pytest.mark.parametrize("name", sorted(SCALAR_FUNCTIONS))
@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_second_and_third_derivatives_match_torch(name, dtypes, device):
    tdt, pdt, tol = dtypes
    values = np.array([0.7, -1.3, 2.1, -0.4])
    f = SCALAR_FUNCTIONS[name]
    ours = derivatives(tt, f, leaf(tt, values, tdt, device), 3)
    theirs = derivatives(torch, f, leaf(torch, values, pdt), 3)
    for a, b in zip(ours, theirs):
        assert a.requires_grad == b.requires_grad
        assert_close(a, b, tol)


def test_nth_derivatives_of_sin_and_tanh_and_newtons_method():
    x, tx = leaf(tt, 0.3, tt.float64), leaf(torch, 0.3, torch.float64)  # 0-d, as DeZero's
    for f in (lambda m, v: v.sin(), lambda m, v: v.tanh()):
        for a, b in zip(derivatives(tt, f, x, 6), derivatives(torch, f, tx, 6)):
            assert_close(a, b, 1e-10)
    # DeZero step 33: Newton's method with the second derivative, x <- x - f'(x) / f''(x)
    xs = {}
    for m in (tt, torch):
        v = leaf(m, 2.0, tt.float64 if m is tt else torch.float64)
        for _ in range(10):
            g, g2 = derivatives(m, SCALAR_FUNCTIONS["quartic"], v, 2)
            v = (v - g / g2).detach().requires_grad_(True)
        xs[m] = v
    assert_close(xs[tt], xs[torch], 1e-12)
    assert xs[tt].item() == pytest.approx(1.0)


def mlp(m, x, params, target):
    w1, b1, w2, b2 = params
    fn = lib(m)[1]
    h = fn.linear(x, w1, b1).tanh()
    return fn.mse_loss(fn.linear(h, w2, b2), target)


def mlp_values():
    return [RNG.standard_normal(s) * 0.5 for s in ((3, 4), (3,), (2, 3), (2,))]


@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_hessian_of_an_mlp_loss_and_hvp_match_torch(dtypes):
    tdt, pdt, tol = dtypes
    x, target, values = RNG.standard_normal((5, 4)), RNG.standard_normal((5, 2)), mlp_values()
    v = [RNG.standard_normal(p.shape) for p in values]
    results = {}
    for m, dt in ((tt, tdt), (torch, pdt)):
        xs, ts = leaf(m, x, dt, requires_grad=False), leaf(m, target, dt, requires_grad=False)
        params = tuple(leaf(m, p, dt, requires_grad=False) for p in values)

        def loss(*p, m=m, xs=xs, ts=ts):
            return mlp(m, xs, p, ts)

        hess = m.autograd.functional.hessian(loss, params)
        # a Hessian-vector product by hand: the gradient of (grad . v)
        ps = [leaf(m, p, dt) for p in values]
        grads = m.autograd.grad(mlp(m, xs, ps, ts), ps, create_graph=True)
        dot = sum((g * leaf(m, u, dt, requires_grad=False)).sum() for g, u in zip(grads, v))
        hv = m.autograd.grad(dot, ps)
        vs = tuple(leaf(m, u, dt, requires_grad=False) for u in v)
        _, fhvp = m.autograd.functional.hvp(loss, params, vs)
        _, fvhp = m.autograd.functional.vhp(loss, params, vs)
        results[m] = [h for row in hess for h in row] + list(hv) + list(fhvp) + list(fvhp)
    assert len(results[tt]) == 16 + 12
    for a, b in zip(results[tt], results[torch]):
        assert_close(a, b, tol)


def test_functional_jacobian_vjp_jvp_match_torch():
    a, w = RNG.standard_normal(3), RNG.standard_normal((2, 3))
    out = {}
    for m in (tt, torch):
        x, y = leaf(m, a, None, requires_grad=False), leaf(m, w, None, requires_grad=False)
        f = lambda x, y: ((y @ x).sin(), (x[:2] * x[1:]).exp())  # noqa: E731
        jac = m.autograd.functional.jacobian(f, (x, y))
        single = m.autograd.functional.jacobian(lambda x: x.tanh() * x.sum(), x)
        u = (m.ones(2, dtype=x.dtype), m.ones(2, dtype=x.dtype))
        _, vjp = m.autograd.functional.vjp(f, (x, y), u)
        _, jvp = m.autograd.functional.jvp(f, (x, y), (x * 0 + 1, y * 2))
        out[m] = [t for row in jac for t in row] + [single, *vjp, *jvp]
    for a, b in zip(out[tt], out[torch]):
        assert_close(a, b, 1e-12)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        tt.autograd.functional.jacobian(lambda x, y: x * 2, (tt.ones(2), tt.ones(2)), strict=True)
    assert torch.autograd.functional.jacobian(lambda x, y: x * 2,
                                              (torch.ones(2), torch.ones(2)))[1].abs().sum() == 0
    assert tt.autograd.functional.jacobian(lambda x, y: x * 2,
                                           (tt.ones(2), tt.ones(2)))[1].abs().sum().item() == 0


def gradient_penalty(m, critic, real, fake, alpha):
    """WGAN-GP: ((|d critic(x_hat) / d x_hat|_2 - 1)^2).mean() on the interpolates."""
    x_hat = (alpha * real + (1 - alpha) * fake).detach().requires_grad_(True)
    out = critic(x_hat)
    (g,) = m.autograd.grad(out, x_hat, grad_outputs=m.ones_like(out), create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def wgan_step(m, dt, values, critic_fn, real, fake, alpha):
    params = [leaf(m, p, dt) for p in values]
    real, fake, alpha = (leaf(m, v, dt, requires_grad=False) for v in (real, fake, alpha))

    def critic(x):
        return critic_fn(m, x, params)

    loss = critic(fake).mean() - critic(real).mean() + 10 * gradient_penalty(
        m, critic, real, fake, alpha)
    loss.backward()
    return [loss] + [p.grad for p in params]


def linear_critic(m, x, p):
    fn = lib(m)[1]
    return fn.linear(fn.leaky_relu(fn.linear(x, p[0], p[1]), 0.2), p[2], p[3])


def conv_critic(m, x, p):
    fn = lib(m)[1]
    h = fn.leaky_relu(fn.conv2d(x, p[0], p[1], stride=2, padding=1), 0.2)
    h = fn.leaky_relu(fn.conv2d(h, p[2], p[3], stride=1, padding=1), 0.2)
    return fn.linear(h.flatten(1), p[4], p[5])


@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("kind", ["linear", "conv2d"])
def test_wgan_gp_penalty_step_gives_torchs_critic_gradients(kind, dtypes):
    tdt, pdt, tol = dtypes
    if kind == "linear":
        shapes, data, critic = [(8, 5), (8,), (1, 8), (1,)], (6, 5), linear_critic
    else:
        shapes = [(4, 2, 3, 3), (4,), (3, 4, 3, 3), (3,), (1, 3 * 4 * 4), (1,)]
        data, critic = (3, 2, 8, 8), conv_critic
    values = [RNG.standard_normal(s) * 0.4 for s in shapes]
    real, fake = RNG.standard_normal(data), RNG.standard_normal(data)
    alpha = RNG.uniform(size=(data[0],) + (1,) * (len(data) - 1))
    ours = wgan_step(tt, tdt, values, critic, real, fake, alpha)
    theirs = wgan_step(torch, pdt, values, critic, real, fake, alpha)
    for a, b in zip(ours, theirs):
        assert_close(a, b, tol * 10)


@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_maml_inner_and_outer_step_match_torch(dtypes):
    tdt, pdt, tol = dtypes
    values = mlp_values()
    support = RNG.standard_normal((6, 4)), RNG.integers(0, 2, 6)
    query = RNG.standard_normal((6, 4)), RNG.integers(0, 2, 6)

    def net(m, x, p):
        fn = lib(m)[1]
        return fn.linear(fn.linear(x, p[0], p[1]).relu(), p[2], p[3])

    results = {}
    for m, dt in ((tt, tdt), (torch, pdt)):
        fn = lib(m)[1]
        params = [leaf(m, p, dt) for p in values]
        xs, ys = leaf(m, support[0], dt, requires_grad=False), m.tensor(support[1])
        xq, yq = leaf(m, query[0], dt, requires_grad=False), m.tensor(query[1])
        fast = params
        for _ in range(2):  # two inner SGD steps, differentiable
            grads = m.autograd.grad(fn.cross_entropy(net(m, xs, fast), ys), fast,
                                    create_graph=True)
            fast = [p - 0.4 * g for p, g in zip(fast, grads)]
        outer = fn.cross_entropy(net(m, xq, fast), yq)
        outer.backward()
        results[m] = [outer] + [p.grad for p in params]
    for a, b in zip(results[tt], results[torch]):
        assert_close(a, b, tol)


OPS = {
    "view_flatten_T": lambda m, x, w: (x.reshape(3, 4).T.flatten() * x.view(12)).exp().sum(),
    "permute_expand": lambda m, x, w: (x.permute(1, 0).expand(2, 4, 3) * w[0, :3]).sin().sum(),
    "getitem": lambda m, x, w: (x[1:, ::2] ** 2).sum() * x[0, m.tensor([1, 1, 3])].exp().sum(),
    "matmul": lambda m, x, w: ((x @ w[:, :4].T).tanh() @ w[:, 0]).pow(2).sum() + x[0] @ x[1],
    "softmax_logsoftmax": lambda m, x, w: (x.softmax(1) * x.log_softmax(0)).sum(),
    "cross_entropy": lambda m, x, w: lib(m)[1].cross_entropy(x * w[1, 2:], m.tensor([0, 3, 2])),
    "mse_nll": lambda m, x, w: lib(m)[1].mse_loss(x.sigmoid(), x.cos())
    + lib(m)[1].nll_loss(x.log_softmax(1), m.tensor([1, 0, 2])),
    "norm": lambda m, x, w: x.norm(2, dim=1).sum() * m.linalg.vector_norm(x * w[0, :4], 3),
    "cat_stack": lambda m, x, w: (m.cat([x, x * x], 1).tanh().sum(0)
                                  * m.stack([x[0], x[1]]).sum()).sum(),
    "sum_mean_dims": lambda m, x, w: (x.sum(0, keepdim=True) * x.mean(1, keepdim=True)
                                      ).pow(2).sum() + x.amax(1).sum() ** 2,
    "conv_pool": lambda m, x, w: lib(m)[1].max_pool2d(lib(m)[1].conv2d(
        x.reshape(1, 1, 3, 4), w.reshape(2, 1, 2, 3)[:, :, :, :2], padding=1), 2).tanh().sum(),
    "conv_transpose_avg_pool": lambda m, x, w: lib(m)[1].avg_pool2d(
        lib(m)[1].conv_transpose2d(x.reshape(1, 1, 3, 4), w.reshape(1, 2, 2, 3), stride=2)
        ** 2, 2, padding=1).exp().sum(),
    "conv_groups_dilation": lambda m, x, w: lib(m)[1].conv2d(
        x.reshape(1, 2, 2, 3), w[:, :2].reshape(2, 1, 1, 2), groups=2, dilation=2).sin().sum(),
    "activations": lambda m, x, w: (lib(m)[1].gelu(x) * lib(m)[1].silu(x) + lib(m)[1].elu(x)
                                    + lib(m)[1].softplus(x) + lib(m)[1].logsigmoid(x)).sum(),
    "bce_losses": lambda m, x, w: lib(m)[1].binary_cross_entropy(x.sigmoid(), x.cos() ** 2)
    + lib(m)[1].binary_cross_entropy_with_logits(x, x.sin() ** 2),
    "batch_group_norm_l1": lambda m, x, w: (
        lib(m)[1].batch_norm(x.reshape(3, 2, 2), None, None, training=True).sin().sum()
        + lib(m)[1].group_norm(x.reshape(1, 4, 3), 2).pow(3).sum()
        + lib(m)[1].smooth_l1_loss(x, x.detach().cos() * 2)
        * lib(m)[1].l1_loss(x, w[0, :4].expand(3, 4))),
    "layer_norm_std": lambda m, x, w: (lib(m)[1].layer_norm(x, (4,)) * x.std(1, keepdim=True)
                                       ).tanh().sum() + x.logsumexp(0).sum(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_grad_of_grad_through_ops_matches_torch(name):
    x_values, w_values = RNG.standard_normal((3, 4)) * 0.8, RNG.standard_normal((2, 6)) * 0.8
    out = {}
    for m in (tt, torch):
        x, w = leaf(m, x_values, None), leaf(m, w_values, None)
        gx, gw = m.autograd.grad(OPS[name](m, x, w), (x, w), create_graph=True,
                                 allow_unused=True)
        gw = gw if gw is not None else w * 0
        s = (gx * gx.detach().sin()).sum() + (gw ** 2).sum()
        out[m] = [gx, gw, *m.autograd.grad(s, (x, w), allow_unused=True)]
    for a, b in zip(out[tt], out[torch]):
        assert (a is None) == (b is None)
        if a is not None:
            assert_close(a, b, 1e-10)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_intermediate_grads_carry_graphs_as_torchs():
    seen = {}
    for m in (tt, torch):
        x, z = leaf(m, [1.0, 2.0], None), leaf(m, [1.0, 2.0], None)
        h = x * 3
        h.retain_grad()
        hooked = []
        h.register_hook(lambda g, hooked=hooked: hooked.append(g) or g * 2)
        (h ** 3).sum().backward(create_graph=True)
        (2 * z).sum().backward(create_graph=True)  # a constant gradient: no graph
        first = x.grad.requires_grad, x.grad.grad_fn is not None, h.grad.requires_grad
        (x ** 2).sum().backward(create_graph=True)  # accumulated out of place, with a graph
        (g,) = m.autograd.grad((x ** 3).sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x, create_graph=True)
        (ggg,) = m.autograd.grad(gg.sum(), x)
        seen[m] = (first, z.grad.requires_grad, z.grad.grad_fn is None,
                   hooked[0].requires_grad, g.requires_grad, gg.grad_fn is not None,
                   ggg.requires_grad, x.grad.grad_fn is not None,
                   x.grad.tolist(), h.grad.tolist(), ggg.tolist())
    assert seen[tt] == seen[torch]
    assert seen[tt][0] == (True, True, True)


def test_ctx_style_function_is_differentiated_and_once_differentiable_raises():
    class Legendre3(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 0.5 * (5 * x ** 3 - 3 * x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 1.5 * (5 * x ** 2 - 1)

    x = tt.tensor([0.3, -0.8], dtype=tt.float64, requires_grad=True)
    g, g2 = derivatives(tt, lambda m, v: Legendre3.apply(v), x, 2)
    np.testing.assert_allclose(g2.numpy(), 15 * x.detach().numpy())

    from tinytrain.autograd.function import once_differentiable

    class Square(tt.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            ctx.save_for_backward(v)
            return v * v

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (v,) = ctx.saved_tensors
            return 2 * v * g

    class TorchSquare(torch.autograd.Function):
        forward = staticmethod(Square.forward)
        backward = staticmethod(torch.autograd.function.once_differentiable(
            lambda ctx, g: 2 * ctx.saved_tensors[0] * g))

    for m, fn in ((tt, Square), (torch, TorchSquare)):
        v = leaf(m, [3.0], None)
        (g,) = m.autograd.grad(fn.apply(v).sum() * v.sum(), v, create_graph=True)
        with pytest.raises(RuntimeError, match="differentiate twice a function that was marked"):
            g.sum().backward()


def test_an_op_without_double_backward_raises_naming_it():
    # (the one built-in op left: SyncBatchNorm across ranks, whose statistics are all-reduced)
    from tinytrain.nn.sync_batchnorm import SyncBatchNormFunction

    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    stats = np.zeros(1), np.ones(1)
    y = SyncBatchNormFunction.apply(x.reshape(3, 1), None, None, *stats, 3, None)
    with pytest.raises(NotImplementedError, match=r"create_graph=True\) through "
                       r"SyncBatchNormFunctionBackward: tinytrain has no double backward "
                       r".*supported: .*Conv2d.*Cumprod"):
        tt.autograd.grad(y.sum(), x, create_graph=True)
    (g,) = tt.autograd.grad(x.cumprod(0).sum(), x)  # (cumprod: first order as before, and
    assert g.tolist() == [9.0, 4.0, 2.0]           # now a double backward: test_higher_order9b)

    class Mine(tt.autograd.Function):  # tinytrain's array style: not differentiable again
        @staticmethod
        def forward(a):
            return a * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(NotImplementedError, match="MineBackward: a Function in tinytrain's "
                                                  "array style"):
        Mine.apply(x).sum().backward(create_graph=True)
    # one array given as two different tensors: which is which cannot be told, so it raises
    # (detach() makes a new array object on the memory, so it is told apart)
    (g,) = tt.autograd.grad((x * tt.Tensor(x)).sum(), x)  # (first order: as before)
    assert g.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(NotImplementedError, match="MulBackward: one of its saved arrays was "
                                                  "given as two different tensors"):
        tt.autograd.grad((x * tt.Tensor(x)).sum(), x, create_graph=True)
    (g,) = tt.autograd.grad((x * x.detach()).sum(), x, create_graph=True)
    assert g.tolist() == [1.0, 2.0, 3.0] and not g.requires_grad  # as torch's
    (g,) = tt.autograd.grad((x * x.detach().clone()).sum(), x, create_graph=True)
    assert g.tolist() == [1.0, 2.0, 3.0] and not g.requires_grad  # as torch's
    # a subclass that redefines backward does not inherit its parent's double backward
    assert tt.autograd.ops.Log2.backward_graph is not tt.autograd.ops.Log.backward_graph
    (g,) = tt.autograd.grad(x.log2().sum(), x, create_graph=True)
    (g2,) = tt.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), -1 / (np.array([1, 4, 9.0]) * np.log(2)), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_retain_graph_defaults_to_create_graph_and_in_place_writes_still_raise():
    for m in (tt, torch):
        x = leaf(m, [1.0, 2.0], None)
        y = (x.exp() * x).sum()
        m.autograd.grad(y, x, create_graph=True)
        m.autograd.grad(y, x)  # the graph was retained
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            m.autograd.grad(y, x)
        y = (x.exp() * x).sum()
        y.backward(create_graph=True)
        y.backward()  # retained again (the default), then freed
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
        # a saved tensor written in place: the double backward refuses, as the first does
        (g,) = m.autograd.grad((x ** 3).sum(), x, create_graph=True)
        with m.no_grad():
            x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            g.sum().backward()


PIECEWISE = {
    "relu": lambda m, x: lib(m)[1].relu(x),
    "leaky_relu": lambda m, x: lib(m)[1].leaky_relu(x, 0.1),
    "abs": lambda m, x: x.abs(),
    "max_pool2d": lambda m, x: lib(m)[1].max_pool2d(x.reshape(1, 1, 2, 3), 2, 1),
    "clamp": lambda m, x: x.clamp(-0.5, 0.5),
    "maximum": lambda m, x: m.maximum(x, x.flip(0)),
    "amax": lambda m, x: x.amax(1),
    "where": lambda m, x: m.where(x > 0, x, x * 2),
}


@pytest.mark.parametrize("name", sorted(PIECEWISE))
def test_piecewise_linear_ops_gradients_are_in_the_graph_exactly_when_torchs_are(name):
    """Their second derivative is 0, but PyTorch's gradient of ReLU, leaky ReLU, abs and max
    pooling still reads the input: it requires grad and a later backward gives zeros (not
    "does not require grad"); those of clamp, maximum, amax and where do not."""
    seen = {}
    for m in (tt, torch):
        x = leaf(m, [[0.3, -0.7, 1.2], [-0.1, 0.9, -2.0]], None)
        (g,) = m.autograd.grad(PIECEWISE[name](m, x).sum(), x, create_graph=True)
        gg = m.autograd.grad(g.sum(), x)[0] if g.requires_grad else None
        gg = None if gg is None else (gg + x.detach() * 0).tolist()  # (torch's ZeroTensor)
        seen[m] = (g.requires_grad, gg, g.tolist())
    assert seen[tt] == seen[torch]
