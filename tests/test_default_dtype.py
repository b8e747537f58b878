"""``tt.set_default_dtype`` / ``tt.get_default_dtype``, as PyTorch's: what the default float
dtype changes (Python floats made into tensors, integers turned floating, creation functions
without ``dtype=``, layers' new parameters and buffers, printing) and what it leaves alone,
each case run in tinytrain and in torch under the same default and compared."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tinytrain as tt

DEFAULTS = ["float64", "float32", "float16"]


def set_both(name: str) -> None:
    tt.set_default_dtype(getattr(tt, name))
    torch.set_default_dtype(getattr(torch, name))


@pytest.fixture(params=DEFAULTS)
def default(request: pytest.FixtureRequest):
    """Both libraries' default set to the parameter, and float32 again afterwards (also when
    the test fails). Each case goes through another default first, so that what it sees
    comes from the last call, not from the start-up default."""
    name = request.param
    try:
        set_both("float16" if name == "float64" else "float64")
        set_both(name)
        yield name
    finally:
        set_both("float32")


# Each case is called with the module (tinytrain or torch): the same code in both.
DATA = {  # Python numbers made into tensors
    "tensor(1.5)": lambda m: m.tensor(1.5),
    "tensor(list)": lambda m: m.tensor([1.0, 2.5]),
    "tensor(nested)": lambda m: m.tensor([[0.5], [1.0]]),
    "tensor(ints and floats)": lambda m: m.tensor([1, 2.5]),
    "tensor([])": lambda m: m.tensor([]),
    "tensor(ints)": lambda m: m.tensor([1, 2]),
    "tensor(bool)": lambda m: m.tensor(True),
    "tensor(np.float32)": lambda m: m.tensor(np.array([1.5], dtype=np.float32)),
    "as_tensor(list)": lambda m: m.as_tensor([1.0, 2.0]),
    "Tensor(floats)": lambda m: m.Tensor([1.5, 2.0]),
    "Tensor(ints)": lambda m: m.Tensor([1, 2]),  # (the legacy constructor: floats always)
    "Tensor(nested ints and bools)": lambda m: m.Tensor([[1, True], (0, 2)]),
    "FloatTensor": lambda m: m.FloatTensor([1.5]),
    "DoubleTensor": lambda m: m.DoubleTensor([1.5]),
}
PROMOTION = {  # integers and bools meeting Python floats, or turned floating
    "int * 1.5": lambda m: m.tensor([1, 2, 3]) * 1.5,
    "int / 2": lambda m: m.tensor([1, 2, 3]) / 2,
    "int / int": lambda m: m.tensor([1, 2, 3]) / m.tensor([2, 2, 2]),
    "1 / int": lambda m: 1 / m.tensor([1, 2, 4]),
    "1.5 - int": lambda m: 1.5 - m.tensor([1, 2, 4]),
    "bool + 0.5": lambda m: m.tensor(True) + 0.5,
    "int ** 0.5": lambda m: m.tensor([1, 2, 3]) ** 0.5,
    "int.exp()": lambda m: m.tensor([0, 1, 2]).exp(),
    "int.sqrt()": lambda m: m.tensor([1, 4, 9]).sqrt(),
    "int.sigmoid()": lambda m: m.tensor([-1, 0, 1]).sigmoid(),
    "int.logsumexp()": lambda m: m.tensor([1, 2, 3]).logsumexp(0),
    "int.clamp(0.5)": lambda m: m.tensor([0, 1, 2]).clamp(0.5),
    "where(c, 0.5, 1.5)": lambda m: m.where(m.tensor([True, False]), 0.5, 1.5),
    "where(c, int, 0.5)": lambda m: m.where(m.tensor([True, False]), m.tensor([1, 2]), 0.5),
    "int // 2": lambda m: m.tensor([1, 2, 3]) // 2,
    "float32 * 2.5": lambda m: m.tensor([1.0], dtype=m.float32) * 2.5,
    "float64 * 2.5": lambda m: m.tensor([1.0], dtype=m.float64) * 2.5,
    "int.float()": lambda m: m.tensor([1, 2]).float(),
}
CREATION = {  # creation functions without dtype=, and the ones the default does not reach
    "zeros": lambda m: m.zeros(2, 3),
    "ones": lambda m: m.ones((2,)),
    "full(1.5)": lambda m: m.full((2,), 1.5),
    "full(1)": lambda m: m.full((2,), 1),
    "full(True)": lambda m: m.full((2,), True),
    "eye": lambda m: m.eye(2, 3),
    "arange(0., 3.)": lambda m: m.arange(0.0, 3.0),
    "arange(0, 1, 0.25)": lambda m: m.arange(0, 1, 0.25),
    "arange(3)": lambda m: m.arange(3),
    "linspace": lambda m: m.linspace(0, 1, 5),
    "zeros(dtype=int64)": lambda m: m.zeros(2, dtype=m.int64),
    "zeros_like(int)": lambda m: m.zeros_like(m.tensor([1, 2])),
    "ones_like(float32)": lambda m: m.ones_like(m.tensor([1.0], dtype=m.float32)),
    "full_like(int, 2)": lambda m: m.full_like(m.tensor([1, 2]), 2),
    "clip_grad_norm_([])": lambda m: m.nn.utils.clip_grad_norm_([], 1.0),
    "LayerNorm.weight": lambda m: m.nn.LayerNorm(3).weight,
    "BatchNorm2d.running_var": lambda m: m.nn.BatchNorm2d(2).running_var,
    "BatchNorm2d.num_batches_tracked": lambda m: m.nn.BatchNorm2d(2).num_batches_tracked,
    "GroupNorm.bias": lambda m: m.nn.GroupNorm(1, 2).bias,
}
RANDOM = {  # dtypes and shapes only: the draws differ between the libraries
    "empty": lambda m: m.empty(2, 3),
    "rand": lambda m: m.rand(2, 3),
    "randn": lambda m: m.randn(4),
    "normal(0., 1., size)": lambda m: m.normal(0.0, 1.0, size=(3,)),
    "randint": lambda m: m.randint(0, 5, (3,)),
    "randperm": lambda m: m.randperm(4),
    "Linear.weight": lambda m: m.nn.Linear(3, 2).weight,
    "Linear.bias": lambda m: m.nn.Linear(3, 2).bias,
    "Conv2d.weight": lambda m: m.nn.Conv2d(1, 2, 3).weight,
    "ConvTranspose2d.bias": lambda m: m.nn.ConvTranspose2d(1, 2, 3).bias,
    "Embedding.weight": lambda m: m.nn.Embedding(4, 3).weight,
    "PReLU.weight": lambda m: m.nn.PReLU().weight,
    "init.kaiming_uniform_(empty)": lambda m: m.nn.init.kaiming_uniform_(m.empty(3, 4)),
    "init.normal_(empty)": lambda m: m.nn.init.normal_(m.empty(3)),
}


def name_of(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def check(case, values: bool) -> None:
    ours, ref = case(tt), case(torch)
    assert name_of(ours.dtype) == name_of(ref.dtype), (ours.dtype, ref.dtype)
    assert ours.shape == tuple(ref.shape)
    if values:
        rtol = 1e-3 if ours.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(ours.detach().numpy().astype(np.float64),
                                   ref.detach().numpy().astype(np.float64), rtol=rtol)


@pytest.mark.parametrize("case", [*DATA, *PROMOTION, *CREATION])
def test_dtype_and_values_as_torch(default: str, case: str) -> None:
    assert tt.get_default_dtype() == getattr(tt, default)
    check({**DATA, **PROMOTION, **CREATION}[case], values=True)


@pytest.mark.parametrize("case", RANDOM)
def test_dtype_of_random_draws_and_new_parameters_as_torch(default: str, case: str) -> None:
    check(RANDOM[case], values=False)


def test_finfo_and_printing_follow_the_default(default: str) -> None:
    ours, ref = tt.finfo(), torch.finfo()
    assert (ours.bits, ours.eps, ours.dtype) == (ref.bits, ref.eps, name_of(ref.dtype))
    for case in (lambda m: m.tensor([1.5, 2.0]), lambda m: m.tensor([]),
                 lambda m: m.tensor([1.5], dtype=m.float32),
                 lambda m: m.tensor([1.5], dtype=m.float64),
                 lambda m: m.tensor([], dtype=m.float32),
                 lambda m: m.tensor([1.5], dtype=m.float16)):
        assert repr(case(tt)) == repr(case(torch)).replace("torch.", "")


def test_tensors_keep_their_dtype_when_the_default_changes() -> None:
    before, layer = tt.tensor([1.5]), tt.nn.Linear(2, 2)
    try:
        tt.set_default_dtype(tt.float64)
        assert tt.get_default_dtype() == tt.float64 == tt.double
        assert before.dtype == tt.float32 and layer.weight.dtype == tt.float32
        assert (before * 2.0).dtype == tt.float32
        assert tt.nn.Linear(2, 2).weight.dtype == tt.float64
        assert layer.double().weight.dtype == tt.float64
        assert layer.float().weight.dtype == tt.float32
    finally:
        tt.set_default_dtype(tt.float32)
    assert tt.tensor(1.5).dtype == tt.float32 and tt.zeros(1).dtype == tt.float32


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_non_floating_defaults_are_refused_as_in_torch(dtype: str) -> None:
    with pytest.raises(TypeError) as ref:
        torch.set_default_dtype(getattr(torch, dtype))
    with pytest.raises(TypeError, match="only floating-point types are supported as the "
                                        "default type") as ours:
        tt.set_default_dtype(getattr(tt, dtype))
    assert str(ref.value) in str(ours.value)
    assert tt.get_default_dtype() == tt.float32


@pytest.mark.parametrize("value", [None, "float64", float, np.float64, np.dtype("complex64")],
                         ids=["None", "name", "float", "np.float64", "complex64"])
def test_what_is_not_a_floating_dtype_is_refused(value) -> None:
    with pytest.raises(TypeError, match="only floating-point types are supported as the "
                                        "default type"):
        tt.set_default_dtype(value)
    assert tt.get_default_dtype() == tt.float32 and tt.tensor(1.5).dtype == tt.float32


def test_bfloat16_is_refused_saying_tinytrain_has_none() -> None:
    with pytest.raises(RuntimeError, match="no bfloat16"):  # (tt.bfloat16 is only a name)
        tt.set_default_dtype(tt.bfloat16)
    with pytest.raises(TypeError, match="no bfloat16"):
        tt.set_default_dtype("bfloat16")
    with pytest.raises(TypeError, match="tt.float16, tt.float32 or tt.float64"):
        tt.set_default_dtype(np.dtype(np.longdouble))
    assert tt.get_default_dtype() == tt.float32


def test_set_default_tensor_type_points_to_set_default_dtype() -> None:
    with pytest.raises(AttributeError, match="tt.set_default_dtype"):
        tt.set_default_tensor_type(tt.DoubleTensor)


def test_factory_functions_follow_the_default_on_the_device(device: str) -> None:
    try:
        tt.set_default_dtype(tt.float64)
        made = [tt.zeros(2, device=device), tt.randn(2, device=device),
                tt.tensor([1.5], device=device), tt.arange(0.0, 2.0, device=device),
                tt.linspace(0, 1, 3, device=device), tt.eye(2, device=device),
                tt.full((2,), 0.5, device=device), tt.nn.Linear(2, 2, device=device).weight,
                tt.tensor([1, 2], device=device) / 2]
        assert [t.dtype for t in made] == [tt.float64] * len(made)
        assert {t.device for t in made} == {tt.device(device)}
    finally:
        tt.set_default_dtype(tt.float32)


def test_a_model_made_under_float64_trains_as_torch_does() -> None:
    """A small MLP built after ``set_default_dtype(float64)``: float64 parameters, inputs and
    gradients without a dtype= anywhere, and one SGD step equal to torch's in float64."""
    try:
        set_both("float64")
        tt.manual_seed(0)
        model = tt.nn.Sequential(tt.nn.Linear(4, 8), tt.nn.ReLU(), tt.nn.Linear(8, 3))
        ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                  torch.nn.Linear(8, 3))
        with torch.no_grad():
            for p, q in zip(model.parameters(), ref.parameters(), strict=True):
                q.copy_(torch.from_numpy(p.numpy().copy()))
        assert {p.dtype for p in model.parameters()} == {tt.float64}
        rows = np.random.default_rng(0).standard_normal((5, 4)).tolist()  # Python floats
        x, y = tt.tensor(rows), tt.tensor([0, 2, 1, 1, 0])
        opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            loss = tt.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            ref_opt.zero_grad()
            ref_loss = torch.nn.functional.cross_entropy(ref(torch.tensor(rows)),
                                                         torch.tensor([0, 2, 1, 1, 0]))
            ref_loss.backward()
            ref_opt.step()
            assert loss.dtype == tt.float64
            assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-12)
        for p, q in zip(model.parameters(), ref.parameters(), strict=True):
            assert p.dtype == tt.float64 and p.grad.dtype == tt.float64
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14)
    finally:
        set_both("float32")
