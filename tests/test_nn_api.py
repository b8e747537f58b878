"""tinytrain.nn's API against torch.nn's (PyTorch 2.13): printed models, defaults,
constructor arguments, re-initialisation, containers, state dicts and errors. Each case was
found different by a review (its client programs printed, re-initialised or built models the
PyTorch way)."""

from __future__ import annotations

import copy
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch

import tinytrain as tt
from tinytrain import nn

# --------------------------------------------------------------------------- print(model)


class _Block:
    """A custom module with an ``extra_repr`` and children, defined for either library."""

    @staticmethod
    def make(L, lines: str = "scale=2"):
        class Block(L.Module):
            def __init__(self):
                super().__init__()
                self.fc = L.Linear(2, 3)
                self.inner = L.Sequential(L.Linear(3, 3), L.ReLU())

            def extra_repr(self):
                return lines

        return Block()


def _leaf(L, lines: str):
    class Leaf(L.Module):
        def extra_repr(self):
            return lines

    return Leaf()


REPRS = [
    "Linear(3, 4)", "Linear(3, 4, bias=False)",
    "Conv2d(1, 6, 5)", "Conv2d(1, 6, 3, padding=1)", "Conv2d(1, 6, 3, stride=2, bias=False)",
    "Conv2d(3, 8, (3, 5), padding=(0, 2))", "ConvTranspose2d(4, 3, 3)",
    "ConvTranspose2d(4, 3, (3, 2), stride=2, padding=1, output_padding=1, bias=False)",
    "Upsample(scale_factor=2)", "Upsample(size=(3, 4), mode='bilinear', align_corners=True)",
    "UpsamplingNearest2d(scale_factor=2)", "UpsamplingBilinear2d(size=5)",
    "GroupNorm(2, 8)", "GroupNorm(4, 8, affine=False)", "GroupNorm(1, 8, eps=1e-3, bias=False)",
    "MaxPool2d(2)", "MaxPool2d(3, 1, 1)", "AvgPool2d(2)", "AdaptiveAvgPool2d(1)",
    "ReLU()", "ReLU(inplace=True)", "LeakyReLU()", "LeakyReLU(0.2, inplace=True)", "ELU()",
    "ELU(inplace=True)", "SiLU()", "SiLU(inplace=True)", "GELU('tanh')", "Softplus(beta=2)",
    "Sigmoid()", "Tanh()", "Identity()", "Identity(54, unused=0.1)", "Flatten()",
    "Unflatten(1, (1, 28, 28))", "Embedding(10, 3)", "Embedding(10, 3, padding_idx=0)",
    "Dropout()", "Dropout(0.2)", "Dropout(0.1, inplace=True)", "Dropout2d(0.1)",
    "Softmax()", "Softmax(dim=1)", "LogSoftmax()", "LogSoftmax(dim=1)",
    "BatchNorm1d(10)", "BatchNorm2d(16, momentum=None)", "BatchNorm2d(16, affine=False)",
    "BatchNorm2d(16, bias=False)", "BatchNorm1d(4, track_running_stats=False)",
    "LayerNorm(10)", "LayerNorm([3, 4], elementwise_affine=False)", "LayerNorm(10, bias=False)",
    "MSELoss()", "CrossEntropyLoss()",
    "Sequential()", "ModuleList()", "ModuleDict()",
    "Sequential(Linear(2, 3), ReLU(), Linear(3, 1))",
    "Sequential(OrderedDict([('fc', Linear(2, 3)), ('act', ReLU())]))",
    "Sequential(*[Linear(2, 2) for _ in range(3)], ReLU())",  # Sequential does not group
    "ModuleList([Linear(2, 2) for _ in range(3)])",
    "ModuleList([Linear(2, 2), Linear(2, 2), ReLU(), Linear(2, 2), Linear(2, 3)])",
    "ModuleList([Sequential(Linear(2, 2), ReLU()) for _ in range(2)])",
    "ModuleDict({'a': Linear(2, 2), 'b': ReLU()})",
    "Sequential(Sequential(Conv2d(1, 4, 3), BatchNorm2d(4), ReLU(), MaxPool2d(2)), "
    "ModuleList([ReLU(), ReLU()]), Flatten(), Dropout(0.3), Linear(4, 10))",
    "ParameterList([Parameter(ones(2, 3))])",
    "ParameterList([Parameter(ones(2, 3)), Parameter(ones(4))])",
    "ParameterDict({'a': Parameter(ones(2)), 'b': Parameter(ones(1, 5))})",
    "block(L)", "block(L, 'a=1\\nb=2')", "leaf(L, 'a=1\\nb=2')", "leaf(L, 'one line')",
    "Sequential(block(L), ModuleList([block(L), block(L)]))",
]


def _build(src: str, L, T):
    env = {name: getattr(L, name) for name in dir(L) if name[0].isupper()}
    env.update(OrderedDict=OrderedDict, ones=T.ones, L=L, block=_Block.make, leaf=_leaf)
    return eval(src, env)


@pytest.mark.parametrize("src", REPRS)
def test_repr_is_pytorchs_text(src):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = repr(_build(src, torch.nn, torch))
    ours = repr(_build(src, nn, tt))
    # dtype names are each library's own: torch.float32 (torch.FloatTensor) is float32
    theirs = theirs.replace("torch.FloatTensor", "float32").replace("torch.float32", "float32")
    assert ours == theirs


# --------------------------------------------------------------------------- Softmax's dim


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 3, 4), (2, 3, 4, 5)])
@pytest.mark.parametrize("name", ["Softmax", "LogSoftmax"])
def test_softmax_modules_default_to_pytorchs_implicit_dim(name, shape):
    x = np.random.RandomState(0).randn(*shape).astype(np.float32)
    assert getattr(nn, name)().dim is getattr(torch.nn, name)().dim is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = getattr(nn, name)()(tt.tensor(x)).numpy()
    assert any("dim" in str(w.message) for w in caught)  # the deprecation warning, as torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(torch.nn, name)()(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- reset_parameters


LAYERS = ["Linear(3, 4)", "Linear(3, 4, bias=False)", "Conv2d(2, 3, 3)", "BatchNorm1d(3)",
          "BatchNorm2d(3, affine=False)", "LayerNorm(4)", "Embedding(5, 2)",
          "Embedding(5, 2, padding_idx=1)"]


@pytest.mark.parametrize("src", LAYERS)
def test_reset_parameters_draws_what_the_constructor_draws(src):
    tt.manual_seed(3)
    fresh = _build(src, nn, tt)
    trained = copy.deepcopy(fresh)
    for t in list(trained.parameters()) + list(trained.buffers()):
        t.data[...] = 7
    tt.manual_seed(3)
    assert trained.reset_parameters() is None
    ours = {k: v.numpy() for k, v in trained.state_dict().items()}
    assert {k: v.tolist() for k, v in ours.items()} == {
        k: v.numpy().tolist() for k, v in fresh.state_dict().items()}
    # and what PyTorch's reset gives, where it is not random (norms, the padding row)
    theirs = _build(src, torch.nn, torch)
    with torch.no_grad():
        for t in list(theirs.parameters()) + list(theirs.buffers()):
            t.fill_(7)
    theirs.reset_parameters()
    assert list(ours) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        if "Embedding" in src and "padding_idx" in src:
            np.testing.assert_array_equal(ours[k][1], v.numpy()[1])
        elif "Norm" in src:
            np.testing.assert_array_equal(ours[k], v.numpy())


def test_reset_running_stats_as_pytorch():
    states = []
    for L, T in ((nn, tt), (torch.nn, torch)):
        bn = L.BatchNorm1d(2)
        bn(T.tensor([[1.0, 2.0], [3.0, 5.0]]))
        bn.reset_running_stats()
        states.append({k: v.tolist() for k, v in bn.state_dict().items()})
    assert states[0] == states[1]


def test_the_reinitialise_between_folds_idiom_reinitialises():
    for L, T in ((nn, tt), (torch.nn, torch)):
        m = L.Sequential(L.Linear(2, 2), L.ReLU(), L.Linear(2, 1))
        with T.no_grad():
            for p in m.parameters():
                p.fill_(7.0)
        for layer in m.children():
            if hasattr(layer, "reset_parameters"):
                layer.reset_parameters()
        # U(-1/sqrt(in), 1/sqrt(in)) again
        assert float(m[0].weight.detach().abs().max()) <= 1 / np.sqrt(2)


# --------------------------------------------------------------------------- containers


@pytest.mark.parametrize("other", [
    lambda L: L.ModuleDict({"cc": L.ReLU(), "a": L.Tanh()}),
    lambda L: {"cc": L.ReLU(), "a": L.Tanh()},
    lambda L: [("cc", L.ReLU()), ["a", L.Tanh()]],
])
def test_moduledict_update_and_copy_take_what_pytorch_takes(other):
    results = []
    for L in (nn, torch.nn):
        d = L.ModuleDict({"a": L.Linear(1, 1)})
        d.update(other(L))
        copied = L.ModuleDict(d)
        results.append(([(k, type(m).__name__) for k, m in d.items()], list(copied.keys()),
                        copied["cc"] is d["cc"]))
    assert results[0] == results[1]


def test_moduledict_update_refuses_what_is_not_pairs():
    with pytest.raises(TypeError, match="ModuleDict.update.*int"):
        nn.ModuleDict().update(3)
    with pytest.raises(ValueError, match="element #0"):
        nn.ModuleDict().update([("a", nn.ReLU(), 3)])


def test_parameterdict_from_parameterdict_and_pairs():
    for L, T in ((nn, tt), (torch.nn, torch)):
        d = L.ParameterDict({"w": L.Parameter(T.ones(2))})
        copied = L.ParameterDict(d)
        copied.update([("b", L.Parameter(T.zeros(1)))])
        assert list(copied.keys()) == ["w", "b"] and copied["w"] is d["w"]


def test_parameterlist_slice_is_a_parameterlist():
    for L, T in ((nn, tt), (torch.nn, torch)):
        ps = [L.Parameter(T.ones(1)), L.Parameter(T.ones(2)), L.Parameter(T.ones(3))]
        part = L.ParameterList(ps)[1:]
        assert type(part).__name__ == "ParameterList"
        assert [p is q for p, q in zip(part, ps[1:], strict=True)] == [True, True]


def test_container_errors_as_pytorchs():
    for L in (nn, torch.nn):
        with pytest.raises(TypeError, match="'str' object cannot be interpreted as an integer"):
            L.Sequential(L.ReLU())["0"]
        with pytest.raises(TypeError, match="ModuleList.extend should be called with an "
                                            "iterable.*Linear"):
            L.ModuleList(L.Linear(2, 2))
        with pytest.raises(TypeError, match="unflattened_size must be a tuple of ints, but "
                                            "found type int"):
            L.Unflatten(1, 6)
        with pytest.raises(IndexError):
            L.Sequential(L.ReLU()).insert(10, L.ReLU())
        with pytest.raises(IndexError):
            L.Sequential(L.ReLU()).pop(3)


def test_pop_and_insert_as_pytorch():
    results = []
    for L in (nn, torch.nn):
        s = L.Sequential(L.Linear(1, 1), L.ReLU(), L.Tanh())
        popped = s.pop(1)
        s.insert(-1, L.Sigmoid())
        s.insert(len(s), L.ReLU())
        ml = L.ModuleList([L.ReLU(), L.Tanh()])
        results.append((type(popped).__name__, [type(m).__name__ for m in s], list(s._modules),
                        type(ml.pop(0)).__name__, [type(m).__name__ for m in ml]))
    assert results[0] == results[1]


def test_dir_lists_parameters_submodules_and_buffers():
    for L in (nn, torch.nn):
        m = L.Sequential(OrderedDict(fc=L.Linear(1, 1), bn=L.BatchNorm1d(1)))
        assert {"fc", "bn", "forward"} <= set(dir(m))
        assert {"weight", "bias", "running_mean", "in_features"} & set(dir(m.fc)) == {
            "weight", "bias", "in_features"}
        assert "running_mean" in dir(m.bn)
        assert not any(k[0].isdigit() for k in dir(L.Sequential(L.ReLU())))


# --------------------------------------------------------------------------- state dicts


def _tied(L, T):
    a = L.Linear(2, 2)
    m = L.Sequential(a, a, L.BatchNorm1d(2))
    m.register_buffer("b", T.zeros(1))
    m[2].register_buffer("same", m.b)  # one buffer under two names
    return m


def test_state_dict_and_named_members_arguments_as_pytorch():
    def describe(L, T):
        m = _tied(L, T)
        dest = OrderedDict(x=1)
        out = m.state_dict(destination=dest, prefix="model.")
        kept = m.state_dict(keep_vars=True)
        return (out is dest, list(out), [type(v).__name__ for v in kept.values()],
                kept["0.weight"] is m[0].weight, m.state_dict()["0.weight"].requires_grad,
                [n for n, _ in m.named_parameters(prefix="p")],
                [n for n, _ in m.named_parameters(remove_duplicate=False)],
                [n for n, _ in m.named_parameters(recurse=False)],
                [n for n, _ in m.named_buffers(remove_duplicate=False)],
                [n for n, _ in m.named_buffers(prefix="q", recurse=True)])

    ours, theirs = describe(nn, tt), describe(torch.nn, torch)
    assert ours == theirs


# --------------------------------------------------------------------------- constructor args


@pytest.mark.parametrize("src", ["Linear(3, 4, dtype=T.float64)", "Linear(3, 4, device='cpu')",
                                 "Conv2d(1, 2, 3, dtype=T.float64)",
                                 "Embedding(10, 3, dtype=T.float64)",
                                 "LayerNorm(4, device='cpu', dtype=T.float64)",
                                 "BatchNorm2d(3, dtype=T.float64)",
                                 "BatchNorm1d(3, bias=False, device='cpu')"])
def test_device_and_dtype_arguments_make_the_parameters(src):
    def describe(L, T):
        m = eval("L." + src, {"L": L, "T": T})
        return [(k, str(v.dtype).replace("torch.", ""), str(v.device).split(":")[0],
                 tuple(v.shape)) for k, v in m.state_dict().items()]

    assert describe(nn, tt) == describe(torch.nn, torch)


@pytest.mark.skipif(tt.cuda_is_available(), reason="checks the error of a machine without GPU")
@pytest.mark.parametrize("make", [lambda: nn.Linear(2, 2, device="cuda"),
                                  lambda: nn.BatchNorm2d(2, device="cuda"),
                                  lambda: nn.Conv2d(1, 1, 1, device="cuda")])
def test_device_cuda_without_a_gpu_says_so(make):
    with pytest.raises(RuntimeError, match="device='cuda' needs CuPy and an NVIDIA GPU"):
        make()


def test_integer_dtype_names_the_layer():
    with pytest.raises(TypeError, match="Linear: dtype must be a floating point dtype"):
        nn.Linear(2, 2, dtype=tt.int64)


@pytest.mark.parametrize("name", ["Dropout", "Dropout2d"])
def test_dropout_inplace_writes_into_its_input(name):
    assert getattr(nn, name)(0.5, True).inplace is getattr(torch.nn, name)(0.5, True).inplace
    for L, T in ((nn, tt), (torch.nn, torch)):
        x = T.ones(8, 16, 4, 4)
        out = getattr(L, name)(0.5, inplace=True)(x)
        assert np.array_equal(x.numpy(), out.numpy())  # the input holds the result
        assert set(np.unique(x.numpy()).tolist()) == {0.0, 2.0}
        # through autograd: the gradient is the mask, as out-of-place
        a = T.ones(4, 6, 3, 3, requires_grad=True)
        h = a * 1.0
        y = getattr(L, name)(0.5, inplace=True)(h)
        y.sum().backward()
        assert np.array_equal(a.grad.numpy(), y.detach().numpy())
        x = T.ones(3, 4, 2, 2)
        drop = getattr(L, name)(0.5, inplace=True).eval()
        assert np.array_equal(drop(x).numpy(), np.ones((3, 4, 2, 2), np.float32))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("src, layer", [("Linear(-1, 3)", "Linear"),
                                        ("BatchNorm2d(-3)", "BatchNorm2d"),
                                        ("Embedding(-1, 3)", "Embedding"),
                                        ("LayerNorm(-2)", "LayerNorm"),
                                        ("Conv2d(1, 2, 3, bias=True, dtype='int32')", "Conv2d")])
def test_bad_sizes_name_the_layer(src, layer):
    with pytest.raises((RuntimeError, TypeError), match=f"^{layer}: .*(-\\d|int32)"):
        eval("nn." + src)
    with pytest.raises((RuntimeError, TypeError)):  # PyTorch refuses them too
        eval("torch.nn." + src.replace("'int32'", "torch.int32"))


# --------------------------------------------------------------------------- batch norm


@pytest.mark.parametrize("cls, shape", [("BatchNorm1d", (0, 3)), ("BatchNorm1d", (0, 3, 5)),
                                        ("BatchNorm2d", (0, 3, 2, 2))])
def test_batchnorm_on_an_empty_batch_gives_an_empty_output(cls, shape):
    results = []
    for L, T in ((nn, tt), (torch.nn, torch)):
        bn = getattr(L, cls)(3)
        with T.no_grad():
            bn.running_mean.fill_(5.0)
            bn.running_var.fill_(3.0)
        x = T.zeros(*shape, requires_grad=True)
        y = bn(x)
        y.sum().backward()
        results.append((tuple(y.shape), tuple(x.grad.shape), bn.weight.grad.tolist(),
                        bn.running_mean.tolist(), bn.running_var.tolist(),
                        int(bn.num_batches_tracked)))
    assert results[0] == results[1]


def test_batchnorm_on_one_value_per_channel_still_raises():
    for L, T in ((nn, tt), (torch.nn, torch)):
        with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
            L.BatchNorm1d(3)(T.zeros(1, 3))
