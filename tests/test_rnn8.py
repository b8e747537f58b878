"""Recurrent layers against PyTorch 2.13: ``nn.RNN`` / ``LSTM`` / ``GRU`` and ``RNNCell`` /
``LSTMCell`` / ``GRUCell`` with torch's weights loaded through ``load_state_dict``: outputs,
final states and the gradients of the input, the initial states and every parameter, in
float32 and float64, for several configurations (layers, bidirectional, batch_first,
bias=False, relu, proj_size, unbatched input); parameter names, shapes, initialisation,
reprs, PyTorch's errors and warning, dropout between layers; ``nn.utils.rnn`` (padding,
packing, and packed batches through the layers); and a few training steps of a small LSTM
language model against torch's losses. Each test on each device (``device`` fixture)."""

from __future__ import annotations

import copy
import functools
import warnings

import numpy as np
import pytest
import torch

import tinytrain as tt
import tinytrain.nn as nn

TOL = {np.float32: dict(rtol=1e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}
DTYPES = [np.float32, np.float64]
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}
# (torch's own note that its oneDNN path has no projections)
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning")


def twins(name, dtype, device, *args, **kwargs):
    """torch's ``nn.<name>(*args, **kwargs)`` and tinytrain's, with torch's weights loaded
    into tinytrain's through its state dict (keys must be the same)."""
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(TORCH_DTYPE[dtype])
    ours = getattr(nn, name)(*args, **kwargs, dtype=dtype)
    state = theirs.state_dict()
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict({k: tt.tensor(v.numpy()) for k, v in state.items()})
    return ours.to(device), theirs


def leaves(device, dtype, *arrays):
    arrays = [np.asarray(a, dtype) for a in arrays]
    return ([tt.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def close(ours, theirs, dtype):
    assert ours.shape == tuple(theirs.shape)
    assert ours.dtype == dtype
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **TOL[dtype])


def backward_both(outs, touts, dtype, seed=0):
    """``sum(out * g)`` over every output, with the same random ``g`` on both sides."""
    rng = np.random.default_rng(seed)
    loss, tloss = 0, 0
    for o, t in zip(outs, touts, strict=True):
        close(o, t, dtype)
        g = rng.normal(size=o.shape).astype(dtype)
        loss = loss + (o * tt.tensor(g, device=o.device)).sum()
        tloss = tloss + (t * torch.tensor(g)).sum()
    loss.backward()
    tloss.backward()


def check_grads(ours, theirs, pairs, dtype):
    for a, b in pairs:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **TOL[dtype])
    tparams = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), **TOL[dtype],
                                   err_msg=name)


CONFIGS = [
    ("RNN", {}),
    ("RNN", dict(nonlinearity="relu", num_layers=2)),
    ("RNN", dict(bidirectional=True, batch_first=True)),
    ("LSTM", {}),
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(batch_first=True, bias=False)),
    ("LSTM", dict(num_layers=2, proj_size=3)),
    ("LSTM", dict(bidirectional=True, proj_size=2, batch_first=True)),
    ("GRU", {}),
    ("GRU", dict(num_layers=3, bias=False)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
]


def _states(name, kwargs, batch, unbatched=False):
    """Random initial states of the right shapes (``(h0, c0)`` for an LSTM)."""
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    hidden = kwargs.get("proj_size") or 5
    rng = np.random.default_rng(7)
    lead = (layers,) if unbatched else (layers, batch)
    h0 = rng.normal(size=(*lead, hidden))
    return [h0, rng.normal(size=(*lead, 5))] if name == "LSTM" else [h0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("given_states", [False, True], ids=["zeros", "h0"])
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[f"{n}-{k}" for n, k in CONFIGS])
def test_sequence_layer_matches_torch(device, name, kwargs, given_states, dtype):
    ours, theirs = twins(name, dtype, device, 4, 5, **kwargs)
    steps, batch = 6, 3
    shape = (batch, steps, 4) if kwargs.get("batch_first") else (steps, batch, 4)
    x = np.random.default_rng(1).normal(size=shape)
    arrays = [x] + (_states(name, kwargs, batch) if given_states else [])
    mine, torchs = leaves(device, dtype, *arrays)
    hx, thx = None, None
    if given_states:
        hx, thx = (mine[1], torchs[1]) if name != "LSTM" else (tuple(mine[1:]), tuple(torchs[1:]))
    out, state = ours(mine[0], hx)
    tout, tstate = theirs(torchs[0], thx)
    flat = [out, *state] if name == "LSTM" else [out, state]
    tflat = [tout, *tstate] if name == "LSTM" else [tout, tstate]
    backward_both(flat, tflat, dtype)
    check_grads(ours, theirs, list(zip(mine, torchs, strict=True)), dtype)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_2d_input(device, name, batch_first):
    dtype = np.float64
    kwargs = dict(num_layers=2, bidirectional=True, batch_first=batch_first)
    ours, theirs = twins(name, dtype, device, 4, 5, **kwargs)
    x = np.random.default_rng(2).normal(size=(6, 4))
    mine, torchs = leaves(device, dtype, x, *_states(name, kwargs, 1, unbatched=True))
    hx, thx = ((mine[1], torchs[1]) if name != "LSTM"
               else (tuple(mine[1:]), tuple(torchs[1:])))
    out, state = ours(mine[0], hx)
    tout, tstate = theirs(torchs[0], thx)
    flat = [out, *state] if name == "LSTM" else [out, state]
    tflat = [tout, *tstate] if name == "LSTM" else [tout, tstate]
    backward_both(flat, tflat, dtype)
    check_grads(ours, theirs, list(zip(mine, torchs, strict=True)), dtype)
    out0, _ = ours(tt.tensor(x, device=device))  # without states: zeros
    close(out0, theirs(torch.tensor(x))[0], dtype)


CELLS = [("RNNCell", {}), ("RNNCell", dict(nonlinearity="relu", bias=False)),
         ("LSTMCell", {}), ("LSTMCell", dict(bias=False)), ("GRUCell", {}),
         ("GRUCell", dict(bias=False))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("name,kwargs", CELLS, ids=[f"{n}-{k}" for n, k in CELLS])
def test_cell_matches_torch_over_a_few_steps(device, name, kwargs, batched, dtype):
    ours, theirs = twins(name, dtype, device, 4, 5, **kwargs)
    rng = np.random.default_rng(3)
    lead = (2,) if batched else ()
    arrays = [rng.normal(size=(3, *lead, 4)), rng.normal(size=(*lead, 5))]
    if name == "LSTMCell":
        arrays.append(rng.normal(size=(*lead, 5)))
    mine, torchs = leaves(device, dtype, *arrays)
    state, tstate = ((mine[1], mine[2]), (torchs[1], torchs[2])) if name == "LSTMCell" else (
        mine[1], torchs[1])
    outs, touts = [], []
    for t in range(3):  # gradients flow back through the three steps
        state, tstate = ours(mine[0][t], state), theirs(torchs[0][t], tstate)
        outs += list(state) if name == "LSTMCell" else [state]
        touts += list(tstate) if name == "LSTMCell" else [tstate]
    backward_both(outs, touts, dtype)
    check_grads(ours, theirs, list(zip(mine, torchs, strict=True)), dtype)
    first = ours(tt.tensor(arrays[0][0], dtype=dtype, device=device))  # no state: zeros
    tfirst = theirs(torch.tensor(arrays[0][0], dtype=TORCH_DTYPE[dtype]))
    for a, b in zip(*((first, tfirst) if name == "LSTMCell" else ([first], [tfirst])),
                    strict=True):
        close(a, b, dtype)


@pytest.mark.parametrize("name,kwargs", CONFIGS + [
    ("LSTM", dict(num_layers=3, bias=False, batch_first=True, dropout=0.25,
                  bidirectional=True, proj_size=2)),
    ("RNN", dict(nonlinearity="relu")), ("GRU", dict(dropout=0.5, num_layers=2))])
def test_parameter_names_shapes_repr_and_init(name, kwargs):
    tt.manual_seed(0)
    ours = getattr(nn, name)(4, 5, **kwargs)
    theirs = getattr(torch.nn, name)(4, 5, **kwargs)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert [[tuple(p.shape) for p in ps] for ps in ours.all_weights] == [
        [tuple(p.shape) for p in ps] for ps in theirs.all_weights]
    bound = 1 / np.sqrt(5)
    for p in ours.parameters():
        assert p.dtype == np.float32 and p.requires_grad
        assert (np.abs(p.numpy()) <= bound).all() and p.numpy().std() > bound / 4
    tt.manual_seed(0)
    again = getattr(nn, name)(4, 5, **kwargs)  # the seeded generator draws them
    for a, b in zip(ours.parameters(), again.parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ours.flatten_parameters() is None


@pytest.mark.parametrize("name,kwargs", CELLS)
def test_cell_names_repr_and_init(name, kwargs):
    ours, theirs = getattr(nn, name)(4, 5, **kwargs), getattr(torch.nn, name)(4, 5, **kwargs)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert all((np.abs(p.numpy()) <= 1 / np.sqrt(5)).all() for p in ours.parameters())
    assert isinstance(ours, nn.RNNCellBase)
    if not kwargs.get("bias", True):
        assert ours.bias_ih is None and ours.bias_hh is None


def errors(fn):
    """The message of the error torch raises for ``fn(torch)``, and tinytrain's, and their
    types."""
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn(tt)
    return str(ours.value), str(theirs.value)


def _module(lib, name, *args, **kwargs):
    return getattr(lib.nn, name)(*args, **kwargs)


SAME_ERRORS = [
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(5, 2, 6)),
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(5, 2, 3), (L.zeros(1, 3, 4), L.zeros(1, 2, 4))),
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(5, 2, 3), (L.zeros(1, 2, 4), L.zeros(2, 2, 4))),
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(5, 2, 3), (L.zeros(2, 4), L.zeros(2, 4))),
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(5, 3), (L.zeros(1, 1, 4), L.zeros(1, 1, 4))),
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(5, 2, 3, 1)),
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(5, 2, 3, dtype=L.float64)),
    lambda L: _module(L, "LSTM", 3, 4)(L.zeros(0, 2, 3)),
    lambda L: _module(L, "RNN", 3, 4)(L.zeros(5, 2, 3), L.zeros(2, 2, 4)),
    lambda L: _module(L, "RNN", 3, 4)(L.zeros(5, 2, 3), L.zeros(2, 4)),
    lambda L: _module(L, "RNN", 3, 4)(L.zeros(5, 3), L.zeros(1, 1, 4)),
    lambda L: _module(L, "RNN", 3, 4)(L.zeros(5)),
    lambda L: _module(L, "GRU", 3, 4, num_layers=2, bidirectional=True)(
        L.zeros(5, 2, 3), L.zeros(2, 2, 4)),
    lambda L: _module(L, "GRU", 3, 4, batch_first=True)(L.zeros(2, 5, 3), L.zeros(1, 5, 4)),
    lambda L: _module(L, "LSTMCell", 3, 4)(L.zeros(2, 5)),
    lambda L: _module(L, "LSTMCell", 3, 4)(L.zeros(2, 3), (L.zeros(3, 4), L.zeros(2, 4))),
    lambda L: _module(L, "LSTMCell", 3, 4)(L.zeros(2, 3), (L.zeros(2, 5), L.zeros(2, 4))),
    lambda L: _module(L, "LSTMCell", 3, 4)(L.zeros(2, 3, 1)),
    lambda L: _module(L, "GRUCell", 3, 4)(L.zeros(2, 3), L.zeros(2, 5)),
    lambda L: _module(L, "GRUCell", 3, 4)(L.zeros(2, 3), L.zeros(1, 2, 4)),
    lambda L: _module(L, "RNNCell", 3, 4)(L.zeros(2, 3, 1)),
    lambda L: _module(L, "RNNCell", 3, 4, nonlinearity="gelu")(L.zeros(2, 3)),
    lambda L: _module(L, "RNN", 3, 4, nonlinearity="gelu"),
    lambda L: _module(L, "GRU", 3, 4, proj_size=2),
    lambda L: _module(L, "RNN", 3, 4, proj_size=2),
    lambda L: _module(L, "LSTM", 3, 4, proj_size=4),
    lambda L: _module(L, "LSTM", 3, 4, proj_size=-1),
    lambda L: _module(L, "LSTM", 3, 0),
    lambda L: _module(L, "LSTM", 0, 4),
    lambda L: _module(L, "LSTM", 3, 4, num_layers=0),
    lambda L: _module(L, "LSTM", 3, 4, dropout=1.5),
    lambda L: _module(L, "LSTM", 3, 4, bias=1),
    lambda L: _module(L, "LSTM", 3, 4, batch_first=None),
    lambda L: _module(L, "LSTM", 3.0, 4),
]


@pytest.mark.parametrize("fn", SAME_ERRORS)
def test_errors_are_pytorch_s(fn):
    ours, theirs = errors(fn)
    assert ours == theirs.replace("torch.float", "float")  # (tinytrain's dtypes are NumPy's)


def test_other_errors_are_clear(device):
    lstm = nn.LSTM(3, 4).to(device)
    x = tt.zeros(5, 2, 3, device=device)
    with pytest.raises(TypeError, match="hx must be a tuple"):
        lstm(x, tt.zeros(1, 2, 4, device=device))
    with pytest.raises(RuntimeError, match="the hidden state is float64, the input float32"):
        nn.GRU(3, 4).to(device)(x, tt.zeros(1, 2, 4, dtype=tt.float64, device=device))
    with pytest.raises(RuntimeError, match="the hidden state is float64"):
        nn.GRUCell(3, 4).to(device)(x[0], tt.zeros(2, 4, dtype=tt.float64, device=device))
    with pytest.raises(TypeError, match="input must be a Tensor, not list"):
        nn.RNN(3, 4)([[1.0, 2.0, 3.0]])


def test_dropout_warning_for_one_layer_as_pytorch():
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        nn.GRU(3, 4, dropout=0.2)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        torch.nn.GRU(3, 4, dropout=0.2)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    assert ours[0].category is UserWarning and ours[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.GRU(3, 4, num_layers=2, dropout=0.2)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_dropout_between_layers_only_in_training(device, name):
    dtype = np.float64
    ours, theirs = twins(name, dtype, device, 3, 4, num_layers=2, dropout=1.0)
    x = np.random.default_rng(4).normal(size=(5, 2, 3))
    # p=1 drops every element between the layers, in tinytrain and torch alike
    out, tout = ours(tt.tensor(x, device=device))[0], theirs(torch.tensor(x))[0]
    close(out, tout, dtype)
    ours.eval()
    theirs.eval()
    close(ours(tt.tensor(x, device=device))[0], theirs(torch.tensor(x))[0], dtype)
    assert not np.allclose(ours(tt.tensor(x, device=device))[0].numpy(), out.numpy())
    half = nn.LSTM(3, 4, num_layers=2, dropout=0.5).to(device)
    xs = tt.tensor(x, dtype=tt.float32, device=device)
    train_a, train_b = half(xs)[0].numpy(), half(xs)[0].numpy()
    assert not np.allclose(train_a, train_b)  # a new mask each call
    half.eval()
    np.testing.assert_array_equal(half(xs)[0].numpy(), half(xs)[0].numpy())


def test_a_torch_state_dict_loads_and_the_model_moves(device):
    dtype = np.float32
    ours, theirs = twins("LSTM", dtype, "cpu", 3, 4, num_layers=2, bidirectional=True)
    ours = ours.to(device)
    assert all(p.device == tt.device(device) for p in ours._flat_weights)
    x = np.random.default_rng(5).normal(size=(5, 2, 3)).astype(np.float32)
    close(ours(tt.tensor(x, device=device))[0], theirs(torch.tensor(x))[0], dtype)


# ---------------------------------------------------------------- nn.utils.rnn

LENGTHS = [3, 5, 1, 4]


def _ragged(dtype, seed=8, lengths=LENGTHS, features=3):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, features)).astype(dtype) for n in lengths]


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_sequence_matches_torch(device, batch_first, padding_side):
    dtype = np.float64
    mine, torchs = leaves(device, dtype, *_ragged(dtype))
    kw = dict(batch_first=batch_first, padding_value=-2.5, padding_side=padding_side)
    out = tt.nn.utils.rnn.pad_sequence(mine, **kw)
    tout = torch.nn.utils.rnn.pad_sequence(torchs, **kw)
    backward_both([out], [tout], dtype)
    for a, b in zip(mine, torchs, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
    ones = tt.nn.utils.rnn.pad_sequence([tt.ones(2, dtype=tt.float32),
                                         tt.ones(3, dtype=tt.float64)])
    assert ones.dtype == np.float32 and ones.shape == (3, 2)  # the first sequence's dtype
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        tt.nn.utils.rnn.pad_sequence([])
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right"):
        tt.nn.utils.rnn.pad_sequence(mine, padding_side="middle")
    with pytest.raises(RuntimeError, match="the same trailing shape"):
        tt.nn.utils.rnn.pad_sequence([tt.zeros(2, 3), tt.zeros(2, 4)])


def _same_packed(packed, tpacked, dtype):
    close(packed.data, tpacked.data, dtype)
    assert packed.batch_sizes.tolist() == tpacked.batch_sizes.tolist()
    assert packed.batch_sizes.dtype == np.int64 and packed.batch_sizes.device == tt.device("cpu")
    for a, b in ((packed.sorted_indices, tpacked.sorted_indices),
                 (packed.unsorted_indices, tpacked.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.tolist() == b.tolist()


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_and_pad_packed_match_torch(device, enforce_sorted, batch_first):
    dtype = np.float64
    U, R = tt.nn.utils.rnn, torch.nn.utils.rnn
    lengths = sorted(LENGTHS, reverse=True) if enforce_sorted else LENGTHS
    padded = R.pad_sequence([torch.tensor(a) for a in _ragged(dtype, lengths=lengths)],
                            batch_first=batch_first).numpy()
    (x,), (tx,) = leaves(device, dtype, padded)
    packed = U.pack_padded_sequence(x, tt.tensor(lengths), batch_first, enforce_sorted)
    tpacked = R.pack_padded_sequence(tx, torch.tensor(lengths), batch_first, enforce_sorted)
    assert isinstance(packed, U.PackedSequence) and isinstance(packed, tuple)
    _same_packed(packed, tpacked, dtype)
    out, out_lengths = U.pad_packed_sequence(packed, batch_first, padding_value=7.0,
                                             total_length=6)
    tout, tlengths = R.pad_packed_sequence(tpacked, batch_first, padding_value=7.0,
                                           total_length=6)
    assert out_lengths.tolist() == tlengths.tolist() and out_lengths.dtype == np.int64
    backward_both([out], [tout], dtype)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    seqs = _ragged(dtype, lengths=lengths)
    _same_packed(U.pack_sequence([tt.tensor(a, device=device) for a in seqs], enforce_sorted),
                 R.pack_sequence([torch.tensor(a) for a in seqs], enforce_sorted), dtype)
    for a, b in zip(U.unpack_sequence(packed), seqs, strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b)
    for a, b in zip(U.unpad_sequence(x, lengths, batch_first), seqs, strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b)
    assert packed.to(tt.float32).data.dtype == np.float32 and packed.is_cuda == (device == "cuda")


PACKED_ERRORS = [
    lambda L: L.nn.utils.rnn.pack_padded_sequence(L.zeros(4, 3, 2), [4, 2, 3]),
    lambda L: L.nn.utils.rnn.pack_padded_sequence(L.zeros(4, 3, 2), [4, 0, 3],
                                                  enforce_sorted=False),
    lambda L: L.nn.utils.rnn.pack_padded_sequence(L.zeros(3, 2), [3, 2], batch_first=True),
    lambda L: L.nn.utils.rnn.pad_packed_sequence(
        L.nn.utils.rnn.pack_sequence([L.zeros(4, 2), L.zeros(2, 2)]), total_length=3),
]


@pytest.mark.parametrize("fn", PACKED_ERRORS)
def test_packing_errors_are_pytorch_s(fn):
    ours, theirs = errors(fn)
    assert ours == theirs


def test_packing_refuses_a_length_beyond_the_input():
    """(PyTorch 2.13 reads past the end and returns whatever it finds.)"""
    with pytest.raises(RuntimeError, match="a length of 5 for sequences of 4 steps"):
        tt.nn.utils.rnn.pack_padded_sequence(tt.zeros(4, 3, 2), [5, 2, 3], enforce_sorted=False)


PACKED_CONFIGS = [("RNN", {}), ("LSTM", dict(num_layers=2, bidirectional=True)),
                  ("LSTM", dict(proj_size=2, bidirectional=True)),
                  ("GRU", dict(num_layers=2, bidirectional=True, bias=False))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("given_states", [False, True], ids=["zeros", "h0"])
@pytest.mark.parametrize("name,kwargs", PACKED_CONFIGS, ids=[f"{n}-{k}" for n, k in PACKED_CONFIGS])
def test_layers_take_packed_sequences_as_torch(device, name, kwargs, given_states, dtype):
    """Each sequence stops at its own length: final states and the reverse direction's
    start are PyTorch's, and so are all the gradients."""
    U, R = tt.nn.utils.rnn, torch.nn.utils.rnn
    ours, theirs = twins(name, dtype, device, 3, 5, **kwargs)
    padded = R.pad_sequence([torch.tensor(a) for a in _ragged(dtype)], batch_first=True)
    arrays = [padded.numpy()] + (_states(name, kwargs, len(LENGTHS)) if given_states else [])
    mine, torchs = leaves(device, dtype, *arrays)
    packed = U.pack_padded_sequence(mine[0], LENGTHS, batch_first=True, enforce_sorted=False)
    tpacked = R.pack_padded_sequence(torchs[0], LENGTHS, batch_first=True, enforce_sorted=False)
    hx, thx = None, None
    if given_states:
        hx, thx = (mine[1], torchs[1]) if name != "LSTM" else (tuple(mine[1:]), tuple(torchs[1:]))
    out, state = ours(packed, hx)
    tout, tstate = theirs(tpacked, thx)
    _same_packed(out, tout, dtype)
    flat = [out.data, *state] if name == "LSTM" else [out.data, state]
    tflat = [tout.data, *tstate] if name == "LSTM" else [tout.data, tstate]
    backward_both(flat, tflat, dtype)
    check_grads(ours, theirs, list(zip(mine, torchs, strict=True)), dtype)
    unpacked, lengths = U.pad_packed_sequence(out, batch_first=True)
    close(unpacked, R.pad_packed_sequence(tout, batch_first=True)[0], dtype)


def test_packed_input_errors_are_pytorch_s():
    def call(L, hidden):
        packed = L.nn.utils.rnn.pack_sequence([L.zeros(3, 2), L.zeros(2, 2)])
        return L.nn.RNN(2, 3)(packed, hidden(L))
    for hidden in (lambda L: L.zeros(2, 3), lambda L: L.zeros(1, 3, 3)):
        ours, theirs = errors(lambda L, hidden=hidden: call(L, hidden))
        assert ours == theirs


class _LanguageModel:
    """PyTorch's word_language_model in miniature: Embedding -> LSTM(2 layers) -> Linear,
    built the same way with library ``L``."""

    def __init__(self, L, vocab, emb, hidden):
        self.encoder = L.nn.Embedding(vocab, emb)
        self.rnn = L.nn.LSTM(emb, hidden, num_layers=2)
        self.decoder = L.nn.Linear(hidden, vocab)
        self.modules = [self.encoder, self.rnn, self.decoder]

    def parameters(self):
        return [p for m in self.modules for p in m.parameters()]

    def __call__(self, tokens, hidden):
        out, hidden = self.rnn(self.encoder(tokens), hidden)
        return self.decoder(out), hidden


def test_lstm_language_model_trains_as_torch(device):
    vocab, emb, hidden, steps, batch = 11, 6, 8, 7, 4
    torch.manual_seed(0)
    theirs = _LanguageModel(torch, vocab, emb, hidden)
    ours = _LanguageModel(tt, vocab, emb, hidden)
    for m, tm in zip(ours.modules, theirs.modules, strict=True):
        m.load_state_dict({k: tt.tensor(v.numpy()) for k, v in tm.state_dict().items()})
        m.to(device)
    text = np.random.default_rng(6).integers(0, vocab, size=(steps + 1, batch))
    data = [text] * 6  # the same text again: the loss must fall
    opt = tt.optim.SGD(ours.parameters(), lr=0.5)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.5)
    loss_fn, tloss_fn = tt.nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()
    h, th = None, None
    losses, tlosses = [], []
    for chunk in data:  # truncated backpropagation through time, the hidden state detached
        x, y = tt.tensor(chunk[:-1], device=device), tt.tensor(chunk[1:], device=device)
        logits, h = ours(x, h)
        loss = loss_fn(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        tt.nn.utils.clip_grad_norm_(ours.parameters(), 0.25)
        opt.step()
        h = tuple(s.detach() for s in h)
        tlogits, th = theirs(torch.tensor(chunk[:-1]), th)
        tloss = tloss_fn(tlogits.reshape(-1, vocab), torch.tensor(chunk[1:]).reshape(-1))
        topt.zero_grad()
        tloss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.25)
        topt.step()
        th = tuple(s.detach() for s in th)
        losses.append(loss.item())
        tlosses.append(tloss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5)
    assert losses[-1] < losses[0]
    for p, tp in zip(ours.parameters(), theirs.parameters(), strict=True):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_empty_batch_copy_and_save_round_trip(device, tmp_path):
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True).to(device)
    out, (h, c) = lstm(tt.zeros(5, 0, 3, device=device))
    tout, (th, tc) = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)(torch.zeros(5, 0, 3))
    assert (out.shape, h.shape, c.shape) == (tuple(tout.shape), tuple(th.shape), tuple(tc.shape))
    tt.save(lstm.state_dict(), tmp_path / "lstm.pt")
    again = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    again.load_state_dict(tt.load(tmp_path / "lstm.pt"))
    x = tt.randn(5, 2, 3)
    states = [tt.randn(4, 2, 4), tt.randn(4, 2, 4)]  # (a list is taken, as by torch)
    same = (np.testing.assert_array_equal if device == "cpu"  # (a GPU's GEMMs round apart)
            else functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6))
    same(again(x, states)[0].numpy(),
         lstm(x.to(device), [s.to(device) for s in states])[0].numpy())
    twin = copy.deepcopy(again)
    np.testing.assert_array_equal(twin(x)[0].numpy(), again(x)[0].numpy())
