"""``tt.Generator`` and ``generator=`` (PyTorch's), and RandomSampler's ``replacement`` /
``num_samples``.

tinytrain's generators are NumPy's PCG64, so no number equals PyTorch's: what is checked is
PyTorch's API and errors, that the same seed gives the same sequence, that a generator's draws
leave the global stream (``tt.manual_seed``) alone and do not depend on it, and the samplers'
lengths and distributions. Without a generator every function draws as it did before."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import tinytrain as tt
import tinytrain.nn as nn
import tinytrain.utils.data as ttd

# ------------------------------------------------------------------ the Generator


def test_generator_api_as_pytorch():
    ours, theirs = tt.Generator(), torch.Generator()
    assert ours.initial_seed() == theirs.initial_seed() == 67280421310721
    assert ours.device == "cpu" == str(theirs.device) and ours.device.type == "cpu"
    assert ours.manual_seed(5) is ours and theirs.manual_seed(5) is theirs
    assert ours.initial_seed() == theirs.initial_seed() == 5
    assert ours.manual_seed(-1).initial_seed() == theirs.manual_seed(-1).initial_seed()
    seed = ours.seed()  # the operating system's entropy
    assert isinstance(seed, int) and 0 <= seed < 2**64 and ours.initial_seed() == seed
    assert ours.seed() != seed
    if tt.cuda.is_available():
        assert tt.Generator(device="cuda").device == "cuda"  # (draws are made on the CPU)
    else:
        with pytest.raises(RuntimeError) as theirs:
            torch.Generator(device="cuda")  # (the pinned torch is a CPU build)
        with pytest.raises(RuntimeError, match="CUDA is not available") as ours:
            tt.Generator(device="cuda")
        assert "CUDA" in str(theirs.value) and "cuda" in str(ours.value)
    with pytest.raises(ValueError, match="unknown device 'mps'"):
        tt.Generator("mps")


@pytest.mark.parametrize("seed", [1.5, True, "3"])
def test_generator_manual_seed_refuses_what_pytorch_refuses(seed):
    with pytest.raises(RuntimeError) as theirs:
        torch.Generator().manual_seed(seed)
    with pytest.raises(TypeError) as ours:
        tt.Generator().manual_seed(seed)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="out of range"):
        tt.Generator().manual_seed(2**64)


def test_the_same_seed_gives_the_same_sequence_whatever_the_global_seed():
    tt.manual_seed(1)
    g = tt.Generator().manual_seed(7)
    first = [tt.randn(4, generator=g).tolist() for _ in range(3)]
    assert first[0] != first[1]  # the generator moves on
    tt.manual_seed(2)
    g = tt.Generator().manual_seed(7)
    assert [tt.randn(4, generator=g).tolist() for _ in range(3)] == first
    g.manual_seed(8)
    assert tt.randn(4, generator=g).tolist() != first[0]
    # the global stream draws as before: numpy's default_rng(seed)
    assert tt.manual_seed(3) is tt.default_generator and tt.initial_seed() == 3
    np.testing.assert_array_equal(tt.randn(5).numpy(), np.random.default_rng(3)
                                  .standard_normal(5).astype(np.float32))


def test_state_round_trips_and_is_opaque():
    g = tt.Generator().manual_seed(11)
    tt.rand(3, generator=g)  # (mid-stream)
    state = g.get_state()
    assert state.dtype == tt.uint8 and state.ndim == 1
    ahead = tt.randn(6, generator=g).tolist()
    other = tt.Generator().set_state(state)  # another generator continues from it
    assert other.initial_seed() == 11
    assert tt.randn(6, generator=other).tolist() == ahead
    assert g.set_state(state) is g and tt.randn(6, generator=g).tolist() == ahead
    odd = tt.Generator().manual_seed(2)
    tt.randint(0, 10, (1,), generator=odd)  # a 32-bit draw: PCG64 keeps the other half
    assert odd._rng.bit_generator.state["has_uint32"] == 1
    ahead = tt.randint(0, 10, (9,), generator=copy.deepcopy(odd)).tolist()
    assert tt.randint(0, 10, (9,), generator=tt.Generator().set_state(odd.get_state())
                      ).tolist() == ahead
    with pytest.raises(ValueError, match="a PyTorch state cannot be loaded"):
        g.set_state(tt.tensor(torch.Generator().get_state().numpy()))
    with pytest.raises(TypeError, match="expected a uint8 Tensor"):
        g.set_state(state.numpy().tolist())
    with pytest.raises(TypeError, match="expected a uint8 Tensor .*got int64"):
        g.set_state(state.long())


def test_a_generator_pickles_and_copies_with_its_state():
    g = tt.Generator().manual_seed(4)
    tt.rand(2, generator=g)  # (mid-stream)
    twins = [pickle.loads(pickle.dumps(g)), copy.deepcopy(g)]
    ahead = tt.rand(5, generator=g).tolist()
    for twin in twins:
        assert twin is not g and twin.initial_seed() == 4
        assert tt.rand(5, generator=twin).tolist() == ahead


def test_default_generator_is_the_global_stream():
    tt.manual_seed(9)
    a = tt.randn(3).tolist()
    tt.manual_seed(9)
    assert tt.randn(3, generator=tt.default_generator).tolist() == a
    state = tt.default_generator.get_state()
    b = tt.rand(4).tolist()
    tt.default_generator.set_state(state)
    assert tt.rand(4).tolist() == b and tt.initial_seed() == 9
    seed = tt.seed()
    assert tt.initial_seed() == seed and isinstance(seed, int)
    x = tt.randn(3).tolist()
    tt.manual_seed(seed)
    assert tt.randn(3).tolist() == x
    assert tt.manual_seed(0) is tt.default_generator
    assert torch.manual_seed(0) is torch.default_generator


# ------------------------------------------------------------------ generator= everywhere

DRAWS = {
    "randn": lambda g: tt.randn(2, 3, generator=g),
    "rand": lambda g: tt.rand(5, generator=g),
    "randint": lambda g: tt.randint(0, 100, (6,), generator=g),
    "randperm": lambda g: tt.randperm(10, generator=g),
    "normal-numbers": lambda g: tt.normal(1.0, 2.0, (4,), generator=g),
    "normal-tensor": lambda g: tt.normal(tt.zeros(4), 1.0, generator=g),
    "randn_like": lambda g: tt.randn_like(tt.zeros(3), generator=g),
    "rand_like": lambda g: tt.rand_like(tt.zeros(3), generator=g),
    "multinomial": lambda g: tt.multinomial(tt.ones(8), 4, generator=g),
    "Tensor.multinomial": lambda g: tt.ones(2, 8).multinomial(3, True, generator=g),
    "bernoulli": lambda g: tt.bernoulli(tt.full((12,), 0.5), generator=g),
    "Tensor.bernoulli(p)": lambda g: tt.zeros(12).bernoulli(0.5, generator=g),
    "bernoulli_": lambda g: tt.zeros(12).bernoulli_(0.3, generator=g),
    "uniform_": lambda g: tt.zeros(5).uniform_(-1, 1, generator=g),
    "normal_": lambda g: tt.zeros(5).normal_(0, 1, generator=g),
    "init.uniform_": lambda g: nn.init.uniform_(tt.zeros(5), generator=g),
    "init.normal_": lambda g: nn.init.normal_(tt.zeros(5), generator=g),
    "init.kaiming_uniform_": lambda g: nn.init.kaiming_uniform_(tt.zeros(3, 4), generator=g),
    "init.kaiming_normal_": lambda g: nn.init.kaiming_normal_(tt.zeros(3, 4), generator=g),
    "init.xavier_uniform_": lambda g: nn.init.xavier_uniform_(tt.zeros(3, 4), generator=g),
    "init.xavier_normal_": lambda g: nn.init.xavier_normal_(tt.zeros(3, 4), generator=g),
    "init.trunc_normal_": lambda g: nn.init.trunc_normal_(tt.zeros(6), generator=g),
    "init.orthogonal_": lambda g: nn.init.orthogonal_(tt.zeros(3, 4), generator=g),
}


@pytest.mark.parametrize("name", DRAWS)
def test_generator_keyword_draws_from_the_generator_only(name):
    draw = DRAWS[name]
    tt.manual_seed(0)
    before = tt.get_rng_state()
    first = draw(tt.Generator().manual_seed(3)).tolist()
    assert tt.get_rng_state() == before  # the global stream did not move
    tt.manual_seed(123)
    assert draw(tt.Generator().manual_seed(3)).tolist() == first
    assert any(draw(tt.Generator().manual_seed(s)).tolist() != first for s in (4, 5, 6))
    with pytest.raises(TypeError, match="generator must be None or a tt.Generator"):
        draw(object())


def test_pytorch_spellings_of_generator_keywords():
    """The places where PyTorch takes ``generator=``, checked against its signatures."""
    g = tt.Generator().manual_seed(0)
    torch.nn.init.kaiming_uniform_(torch.zeros(2, 2), 0, "fan_in", "leaky_relu",
                                   torch.Generator())  # (positional in PyTorch)
    nn.init.kaiming_uniform_(tt.zeros(2, 2), 0, "fan_in", "leaky_relu", g)
    torch.nn.init.xavier_normal_(torch.zeros(2, 2), 1.0, torch.Generator())
    nn.init.xavier_normal_(tt.zeros(2, 2), 1.0, g)
    assert tt.zeros(3).uniform_(2, 3, generator=g).min().item() >= 2


# ------------------------------------------------------------------ samplers


def test_random_sampler_takes_pytorchs_arguments_in_its_order():
    ours = ttd.RandomSampler(range(10), True, 25, tt.Generator().manual_seed(0))
    theirs = tud.RandomSampler(range(10), True, 25, torch.Generator().manual_seed(0))
    assert len(ours) == len(theirs) == 25 and ours.num_samples == theirs.num_samples == 25
    assert (ours.replacement, theirs.replacement) == (True, True)
    assert len(list(ours)) == len(list(theirs)) == 25
    assert len(ttd.RandomSampler(range(4))) == len(tud.RandomSampler(range(4))) == 4


@pytest.mark.parametrize("kwargs", [dict(num_samples=0), dict(num_samples=-1),
                                    dict(num_samples=2.0), dict(replacement=1),
                                    dict(replacement=None)])
def test_random_sampler_refuses_as_pytorch(kwargs):
    with pytest.raises((TypeError, ValueError)) as theirs:
        tud.RandomSampler(range(3), **kwargs)
    with pytest.raises(theirs.type) as ours:
        ttd.RandomSampler(range(3), **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_random_sampler_without_replacement_gives_whole_permutations_then_cuts():
    for lib, data in ((ttd, range(3)), (tud, range(3))):  # the same structure as PyTorch's
        order = list(lib.RandomSampler(data, num_samples=8))
        assert len(order) == 8
        assert sorted(order[0:3]) == sorted(order[3:6]) == [0, 1, 2]
        assert len(set(order[6:])) == 2
    counts = np.zeros(5, int)
    sampler = ttd.RandomSampler(range(5), num_samples=4, generator=tt.Generator().manual_seed(1))
    for _ in range(2000):  # num_samples < n: each index equally likely to be left out
        order = list(sampler)
        assert len(set(order)) == 4
        counts[order] += 1
    assert np.all(np.abs(counts - 1600) < 5 * np.sqrt(2000 * 0.8 * 0.2))
    with pytest.raises(ValueError, match="cannot draw num_samples=3 indices from an empty"):
        list(ttd.RandomSampler([], num_samples=3))
    for lib in (ttd, tud):  # an empty data set is refused when the sampler is made
        for replacement in (False, True):
            with pytest.raises(ValueError, match="but got num_samples=0"):
                lib.RandomSampler([], replacement)


def test_random_sampler_with_replacement_repeats_and_is_uniform():
    sampler = ttd.RandomSampler(range(10), replacement=True, num_samples=20_000,
                                generator=tt.Generator().manual_seed(0))
    draws = np.array(list(sampler))
    assert draws.shape == (20_000,) and draws.min() >= 0 and draws.max() <= 9
    counts = np.bincount(draws, minlength=10)
    assert np.all(np.abs(counts - 2000) < 5 * np.sqrt(20_000 * 0.1 * 0.9))
    small = list(ttd.RandomSampler(range(3), replacement=True, num_samples=30))
    assert len(small) == 30 and len(set(small)) < 30  # (repeats: 30 draws of 3 values)
    assert len(list(ttd.RandomSampler(range(3), replacement=True))) == 3


def test_random_sampler_generator_and_seed():
    def epochs(sampler, k=3):
        return [list(sampler) for _ in range(k)]

    mine = epochs(ttd.RandomSampler(range(20), generator=tt.Generator().manual_seed(5)))
    tt.manual_seed(1)
    assert epochs(ttd.RandomSampler(range(20), generator=tt.Generator().manual_seed(5))) == mine
    assert mine[0] != mine[1]  # a new order every epoch
    before = tt.get_rng_state()
    epochs(ttd.RandomSampler(range(20), generator=tt.Generator()))
    assert tt.get_rng_state() == before
    # seed= (tinytrain's) keeps epoch e a function of (seed, e), also with replacement
    seeded = ttd.RandomSampler(range(20), replacement=True, num_samples=7, seed=3)
    run = epochs(seeded)
    seeded.set_epoch(1)
    assert list(seeded) == run[1]
    assert epochs(ttd.RandomSampler(range(20), True, 7, seed=3)) == run
    with pytest.raises(ValueError, match="seed= or generator=, not both"):
        ttd.RandomSampler(range(3), generator=tt.Generator(), seed=0)


def test_random_sampler_with_num_samples_in_a_dataloader():
    ds, tds = ttd.TensorDataset(np.arange(10.0)), tud.TensorDataset(torch.arange(10.0))
    ours = ttd.DataLoader(ds, batch_size=4, sampler=ttd.RandomSampler(ds, True, 9))
    theirs = tud.DataLoader(tds, batch_size=4, sampler=tud.RandomSampler(tds, True, 9))
    assert len(ours) == len(theirs) == 3
    assert [len(b[0]) for b in ours] == [len(b[0]) for b in theirs] == [4, 4, 1]


def test_subset_and_weighted_samplers_take_a_generator():
    for make in (lambda g: ttd.SubsetRandomSampler([7, 2, 9, 4, 5], generator=g),
                 lambda g: ttd.WeightedRandomSampler([0.1, 0.5, 0.4], 12, generator=g)):
        before = tt.get_rng_state()
        first = list(make(tt.Generator().manual_seed(2)))
        assert tt.get_rng_state() == before
        tt.manual_seed(8)
        assert list(make(tt.Generator().manual_seed(2))) == first
        sampler = make(tt.Generator().manual_seed(2))
        assert [list(sampler) for _ in range(4)][0] == first


def test_random_split_takes_pytorchs_generator_argument():
    data = list(range(30))
    split = lambda g: [list(s) for s in ttd.random_split(data, [10, 20], g)]  # noqa: E731
    torch_split = torch.utils.data.random_split(data, [10, 20], torch.Generator())
    assert [len(s) for s in split(tt.Generator())] == [len(s) for s in torch_split]
    before = tt.get_rng_state()
    first = split(tt.Generator().manual_seed(0))
    assert tt.get_rng_state() == before
    assert sorted(first[0] + first[1]) == data
    assert split(tt.Generator().manual_seed(0)) == first
    assert split(tt.Generator().manual_seed(1)) != first
    keyword = ttd.random_split(data, [0.5, 0.5], generator=tt.Generator().manual_seed(0))
    assert [len(s) for s in keyword] == [15, 15]
    assert [list(s) for s in ttd.random_split(data, [10, 20], seed=4)] == [
        list(s) for s in ttd.random_split(data, [10, 20], seed=4)]


# ------------------------------------------------------------------ DataLoader


def _batches(loader):
    return [b[0].numpy().tolist() for b in loader]


def test_dataloader_shuffles_from_its_generator():
    ds = ttd.TensorDataset(np.arange(12.0))
    make = lambda s: ttd.DataLoader(ds, batch_size=5, shuffle=True,  # noqa: E731
                                    generator=tt.Generator().manual_seed(s))
    tt.manual_seed(0)
    before = tt.get_rng_state()
    loader = make(1)
    epochs = [_batches(loader) for _ in range(3)]
    assert tt.get_rng_state() == before  # the global stream is not touched
    assert epochs[0] != epochs[1]  # a new order each epoch, from the generator
    assert sorted(sum(epochs[0], [])) == list(map(float, range(12)))
    tt.manual_seed(5)
    again = make(1)
    assert [_batches(again) for _ in range(3)] == epochs
    assert _batches(make(2)) != epochs[0]
    assert again.generator is again.sampler.generator and isinstance(again.sampler,
                                                                     ttd.RandomSampler)
    theirs = tud.DataLoader(tud.TensorDataset(torch.arange(12.0)), batch_size=5, shuffle=True,
                            generator=torch.Generator())
    assert theirs.sampler.generator is theirs.generator and len(theirs) == len(loader)
    with pytest.raises(ValueError, match="seed= or generator=, not both"):
        ttd.DataLoader(ds, shuffle=True, seed=0, generator=tt.Generator())
    plain = ttd.DataLoader(ds, batch_size=5, generator=tt.Generator())  # (unused, as PyTorch)
    assert _batches(plain)[0] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_dataloader_and_sampler_with_a_generator_pickle_and_continue():
    ds = ttd.TensorDataset(np.arange(10.0))
    loader = ttd.DataLoader(ds, batch_size=3, shuffle=True,
                            generator=tt.Generator().manual_seed(3))
    _batches(loader)
    twin = pickle.loads(pickle.dumps(loader))
    assert [_batches(twin) for _ in range(2)] == [_batches(loader) for _ in range(2)]
    sampler = ttd.WeightedRandomSampler([1.0, 2.0], 6, generator=tt.Generator().manual_seed(1))
    copied = copy.deepcopy(sampler)
    assert list(copied) == list(sampler) and copied.generator is not sampler.generator


def test_rand_in_a_narrow_dtype_stays_below_one_like_torch(dtype="float16"):
    """float64 draws rounded to float16 gave 1.0 about once in 4096 samples (float32: once
    in ~2**25); PyTorch's rand never returns 1. The draws below 1 are unchanged."""
    g = tt.Generator().manual_seed(0)
    x = tt.rand(200_000, dtype=getattr(tt, dtype), generator=g)
    assert float(x.max()) < 1.0
    reference = tt.Generator().manual_seed(0)
    wide = tt.rand(200_000, dtype=tt.float64, generator=reference).numpy()
    below = wide.astype(dtype) < 1
    assert np.array_equal(x.numpy()[below], wide.astype(dtype)[below])
