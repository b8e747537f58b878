"""Reinforcement-learning client programs ported by their imports, run with tinytrain and with
PyTorch on the same CartPole episodes and the same random numbers, and what porting them
found (helper port10b).

Programs (whole scripts in ``tests/tutorials/``, changed lines marked ``# tinytrain:``):
pytorch/examples' ``reinforcement_learning/reinforce.py`` (REINFORCE with a Categorical
policy and dropout) and ``actor_critic.py`` (an actor-critic on gym's API before 0.26), and
PyTorch's "Reinforcement Learning (DQN) Tutorial" (replay memory of namedtuple Transitions,
epsilon-greedy actions, a target network soft-updated through ``state_dict``, SmoothL1Loss,
AdamW with amsgrad, ``clip_grad_value_``, ``gather``, ``max(1).values``).

gym and gymnasium are not installed: ``tests/tutorials/gym_shim.py`` is gymnasium's CartPole
(its equations and seeding), installed here under the name each program imports. The
environment is deterministic given its seed, so with the same actions both runs see the same
episodes: :class:`SampleDraws` (``Draws`` of tests/test_ports9.py, which replays tinytrain's
random draws in the PyTorch run) also replays what ``distributions.*.sample`` drew. The
programs convert their states with ``.float()`` / ``dtype=torch.float32``, so they run in
float32: printed rewards are the same to the last digit, parameters to float32 rounding.
"""

from __future__ import annotations

import math
import pickle
import re
import sys
import warnings

import numpy as np
import pytest
import test_ports9
import torch
from test_ports9 import Draws, _same_plots, run_both
from test_tutorials import TUTORIALS

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")

#: The distributions whose ``sample`` is replayed (both libraries have these).
DISTRIBUTIONS = ("Categorical", "Bernoulli", "Normal")


class SampleDraws(Draws):
    """:class:`Draws` that also keeps what tinytrain's ``distributions.X.sample`` gave and
    makes PyTorch's same call (made for real: its arguments are checked, its shape and dtype
    compared) return it."""

    def record(self, monkeypatch) -> None:
        super().record(monkeypatch)
        for name in DISTRIBUTIONS:
            cls = getattr(tt.distributions, name)

            def sample(dist, sample_shape=(), real=cls.sample, name=name):
                with self._outermost() as outer:
                    out = real(dist, sample_shape)
                if outer:
                    self.values.append((f"{name}.sample", np.array(out.numpy())))
                return out
            monkeypatch.setattr(cls, "sample", sample)

    def replay(self, monkeypatch) -> None:
        super().replay(monkeypatch)
        for name in DISTRIBUTIONS:
            cls = getattr(torch.distributions, name)

            def sample(dist, sample_shape=(), real=cls.sample, name=name):
                with self._outermost() as outer:
                    out = real(dist, sample_shape)
                if not outer:
                    return out
                assert self.replayed < len(self.values), f"{name}.sample: tinytrain drew less"
                was, value = self.values[self.replayed]
                self.replayed += 1
                assert was == f"{name}.sample" and tuple(out.shape) == value.shape, (
                    name, was, value.shape, out.shape)
                assert str(out.dtype).removeprefix("torch.") == value.dtype.name, (name, out)
                return torch.from_numpy(value.copy())
            monkeypatch.setattr(cls, "sample", sample)


def run_rl(name, tmp_path, monkeypatch, capsys, gym_name, old_api=False, argv=(),
           reward_threshold=None):
    """``run_both`` of tutorial ``name`` with gym_shim installed as ``gym_name`` (the
    CartPole spec's ``reward_threshold`` lowered when given: the programs of pytorch/examples
    stop there, "Solved!"); ``runs["losses"]``: the values of each run's ``smooth_l1_loss``
    calls (the critic's and the DQN's Huber losses), tinytrain's and PyTorch's."""
    monkeypatch.syspath_prepend(str(TUTORIALS))
    import gym_shim

    monkeypatch.setitem(sys.modules, gym_name, gym_shim.module(gym_name, old_api=old_api))
    if reward_threshold is not None:
        for spec in gym_shim.registry.values():
            monkeypatch.setattr(spec, "reward_threshold", reward_threshold)
    monkeypatch.setattr(test_ports9, "Draws", SampleDraws)
    losses = {tt: [], torch: []}  # the Huber losses each run computed, in order
    for lib in (tt, torch):  # (nn.SmoothL1Loss calls it too)
        def recording(*args, real=lib.nn.functional.smooth_l1_loss, kept=losses[lib],
                      **kwargs):
            out = real(*args, **kwargs)
            kept.append(out.item())
            return out
        monkeypatch.setattr(lib.nn.functional, "smooth_l1_loss", recording)
    runs = run_both(name, tmp_path, monkeypatch, capsys, argv=argv)
    runs["losses"] = (losses[tt], losses[torch])
    return runs


def _same_parameters(ours, theirs, rtol=1e-5, atol=1e-6) -> None:
    """The same float32 parameters but for rounding (after these runs: a few ulp apart)."""
    a, b = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert list(a) == list(b)
    for key in a:
        assert a[key].dtype == tt.float32 and b[key].dtype == torch.float32
        np.testing.assert_allclose(a[key].detach().numpy(), b[key].detach().numpy(),
                                   rtol=rtol, atol=atol, err_msg=key)


EPISODE = re.compile(r"^Episode (\d+)\tLast reward: (\d+\.\d\d)\tAverage reward: (\d+\.\d\d)$",
                     re.M)
SOLVED = re.compile(r"^Solved! Running reward is now ([\d.]+) and the last episode runs to "
                    r"(\d+) time steps!$", re.M)


def test_reinforce(tmp_path, monkeypatch, capsys):
    """``Categorical(probs)`` of a softmax over a dropout layer, ``m.log_prob(action)`` kept
    per step, returns in a ``deque`` made a tensor, normalised by ``mean`` and ``std`` + eps,
    ``torch.cat(policy_loss).sum()``, Adam; until "Solved!" (the threshold lowered to 15)."""
    runs = run_rl("rl_reinforce.py", tmp_path, monkeypatch, capsys, "gym",
                  argv=["--log-interval", "1"], reward_threshold=15.0)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert ours == theirs  # the same episodes: the same rewards, printed alike
    episodes = EPISODE.findall(ours)
    assert len(episodes) >= 5 and [int(e[0]) for e in episodes] == list(
        range(1, len(episodes) + 1)), ours
    (solved,) = SOLVED.findall(ours)
    assert 15 < float(solved[0]) < 16 and ours.endswith(f"{solved[1]} time steps!\n")
    _same_parameters(v["policy"], w["policy"])
    assert v["policy"].saved_log_probs == [] and v["policy"].rewards == []


def test_actor_critic(tmp_path, monkeypatch, capsys):
    """gym's API before 0.26 (``env.seed``, 4-tuple ``step``), ``Categorical`` of a 1-D
    ``probs``, ``SavedAction`` namedtuples, ``advantage = R - value.item()`` with ``R`` a 0-d
    tensor, ``F.smooth_l1_loss(value, torch.tensor([R]))`` (a list of a 0-d tensor),
    ``torch.stack(...).sum()`` of both losses."""
    runs = run_rl("rl_actor_critic.py", tmp_path, monkeypatch, capsys, "gym", old_api=True,
                  argv=["--log-interval", "1"], reward_threshold=13.0)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert ours == theirs
    assert len(EPISODE.findall(ours)) >= 5 and len(SOLVED.findall(ours)) == 1, ours
    _same_parameters(v["model"], w["model"])
    ours_losses, theirs_losses = runs["losses"]  # the critic's, one a step
    assert len(ours_losses) == len(theirs_losses) > 50
    np.testing.assert_allclose(ours_losses, theirs_losses, rtol=1e-5, atol=1e-7)


def test_dqn_tutorial(tmp_path, monkeypatch, capsys):
    """The DQN tutorial for 10 episodes (its CPU default, 50, made 10): the same episodes,
    plots, losses, replay memory, network parameters and AdamW moments as PyTorch's."""
    runs = run_rl("rl_dqn_tutorial.py", tmp_path, monkeypatch, capsys, "gymnasium")
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    assert ours == theirs == "Complete\n"
    assert v["episode_durations"] == w["episode_durations"]
    assert v["steps_done"] == w["steps_done"] == sum(v["episode_durations"])
    _same_plots(our_plots, their_plots)
    assert [c[0] for c in our_plots[-8:]] == ["figure", "title", "xlabel", "ylabel", "plot",
                                              "pause", "ioff", "show"]
    assert our_plots[-7][1] == ["Result"]  # plot_durations(show_result=True)
    np.testing.assert_array_equal(our_plots[-4][1][0], v["episode_durations"])
    assert v["device"].type == "cpu"
    ours_losses, theirs_losses = runs["losses"]  # one a step once the memory holds a batch
    assert len(ours_losses) == len(theirs_losses) == v["steps_done"] - v["BATCH_SIZE"] + 1
    np.testing.assert_allclose(ours_losses, theirs_losses, rtol=1e-5, atol=1e-7)
    for net in ("policy_net", "target_net"):
        _same_parameters(v[net], w[net])
    for p, q in zip(v["policy_net"].parameters(), w["policy_net"].parameters()):
        ours_state, theirs_state = v["optimizer"].state[p], w["optimizer"].state[q]
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):  # (amsgrad's maximum too)
            np.testing.assert_allclose(np.asarray(ours_state[key]), theirs_state[key].numpy(),
                                       rtol=1e-4, atol=1e-9, err_msg=key)
    steps = v["optimizer"].state[v["policy_net"].layer1.weight]["step"]
    assert int(steps) == v["steps_done"] - v["BATCH_SIZE"] + 1 > 0  # it optimised each step
    assert len(v["memory"]) == len(w["memory"]) == v["steps_done"]
    for ours_t, theirs_t in zip(v["memory"].memory, w["memory"].memory):
        for a, b in zip(ours_t, theirs_t):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype.itemsize == b.dtype.itemsize and a.shape == tuple(b.shape)
                np.testing.assert_array_equal(a.numpy(), b.numpy())


# ------------------------------------------------------------------ the CartPole shim


def _gym(name="gymnasium", old_api=False):
    sys.path.insert(0, str(TUTORIALS))
    try:
        import gym_shim
    finally:
        sys.path.remove(str(TUTORIALS))
    return gym_shim.module(name, old_api=old_api)


def test_the_shim_is_gymnasiums_cartpole():
    """gymnasium's documented first observation of ``reset(seed=42)``, its time limit
    (``truncated`` at 500 steps of a balancing policy), the fall (``terminated``, reward 1
    still), and its refusals."""
    env = _gym().make("CartPole-v1")
    obs, info = env.reset(seed=42)
    assert obs.dtype == np.float32 and info == {}
    np.testing.assert_allclose(obs, [0.0273956, -0.00611216, 0.03585979, 0.0197368],
                               rtol=1e-6)  # (printed to 8 digits in gymnasium's docs)
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, _ = env.step(int(obs[2] + 0.5 * obs[3] > 0))
        steps += 1
    assert (steps, terminated, truncated, reward) == (500, False, True, 1.0)
    assert abs(obs[0]) < 2.4 and abs(obs[2]) < 12 * math.pi / 180
    env.reset(seed=42)
    steps, terminated = 0, False
    while not terminated:  # always pushed right: the pole falls to the left
        obs, reward, terminated, truncated, _ = env.step(np.int64(1))
        steps += 1
    assert (steps, reward, truncated) == (10, 1.0, False) and obs[2] < -12 * math.pi / 180
    assert env.spec.reward_threshold == 475.0 and env.spec.max_episode_steps == 500
    sample = env.action_space.sample()
    assert isinstance(sample, np.int64) and sample in (0, 1) and env.action_space.n == 2
    for bad in (2, 0.5, tt.tensor(1), np.array([1])):
        with pytest.raises(AssertionError, match="invalid"):
            env.step(bad)
    with pytest.raises(RuntimeError, match="before calling env.reset"):
        _gym().make("CartPole-v1").step(0)


def test_the_shim_has_gyms_api_before_0_26():
    """``env.seed`` (the same episode as gymnasium's ``reset(seed=...)``), ``reset() -> obs``,
    ``step -> (obs, reward, done, info)``, CartPole-v0's 200 steps."""
    env = _gym("gym", old_api=True).make("CartPole-v0")
    assert env.seed(42) == [42]
    first = env.reset()
    np.testing.assert_array_equal(first, _gym().make("CartPole-v0").reset(seed=42)[0])
    obs, done, steps = first, False, 0
    while not done:
        obs, reward, done, info = env.step(int(obs[2] + 0.5 * obs[3] > 0))
        steps += 1
    assert steps == 200 and info == {"TimeLimit.truncated": True}
    assert env.spec.reward_threshold == 195.0 and env.x_threshold == 2.4  # (forwarded)


# ------------------------------------------------------------------ what porting found


def _warned(f):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f()
    return out, [(w.category, re.sub(r" \(Triggered internally at .*", "", str(w.message)),
                  w.filename) for w in caught]


@pytest.mark.parametrize("form", [
    lambda L: L.tensor([1.5]).std(),                      # REINFORCE's returns.std(), one step
    lambda L: L.tensor([1.5]).var(),
    lambda L: L.std(L.tensor([[1.0, 2.0]]), 0),
    lambda L: L.var(L.tensor([[1.0, 2.0]]), dim=0, keepdim=True),
    lambda L: L.tensor([1.0, 2.0]).std(correction=2),
    lambda L: L.zeros(0, 3).std(1),
    lambda L: L.var_mean(L.tensor([1.5])),
    lambda L: L.std_mean(L.tensor([[1.0, 2.0]]), 0),
    lambda L: L.tensor([1.5], dtype=L.float16).std(),
    lambda L: L.tensor([1.0, 2.0]).std(correction=1.5),   # 0.5 degrees of freedom: no warning
    lambda L: L.tensor([1.0, 2.0]).var(unbiased=False),
    lambda L: L.tensor([1.0, 2.0]).std(),
])
def test_var_and_std_warn_as_torch_when_no_degrees_of_freedom_are_left(form):
    """``returns.std()`` of a one-step episode: NaN, and PyTorch's warning ("std(): degrees of
    freedom is <= 0", named after the function that was called), which tinytrain did not
    give; it points at the caller's line."""
    ours, ours_warned = _warned(lambda: form(tt))
    theirs, theirs_warned = _warned(lambda: form(torch))
    for a, b in zip(*(x if isinstance(x, tuple) else (x,) for x in (ours, theirs))):
        assert a.shape == tuple(b.shape) and str(a.dtype) == str(b.dtype).removeprefix("torch.")
        np.testing.assert_allclose(a.float().numpy(), b.float().numpy(), rtol=1e-6)
    assert [w[:2] for w in ours_warned] == [w[:2] for w in theirs_warned]
    assert all(w[2] == __file__ for w in ours_warned)


def test_mean_of_an_empty_tensor_is_nan_without_numpy_warning():
    """PyTorch gives NaN silently; tinytrain let NumPy's RuntimeWarning "Mean of empty slice"
    through (also inside ``std`` of an empty tensor, besides its own warning)."""
    for shape, dim in (((0,), None), ((0, 3), 0), ((0, 3), 1), ((2, 0, 3), (0, 1))):
        ours, ours_warned = _warned(lambda s=shape, d=dim: tt.zeros(*s).mean(d))
        theirs, theirs_warned = _warned(lambda s=shape, d=dim: torch.zeros(*s).mean(d))
        assert ours_warned == theirs_warned == []
        assert ours.shape == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    _, ours_warned = _warned(lambda: tt.zeros(0).std())
    _, theirs_warned = _warned(lambda: torch.zeros(0).std())
    assert [w[:2] for w in ours_warned] == [w[:2] for w in theirs_warned]


@pytest.mark.parametrize("call", [
    lambda L: L.nn.functional.smooth_l1_loss(L.zeros(3), L.ones(3), beta=-1.0),
    lambda L: L.nn.SmoothL1Loss(beta=-0.5)(L.zeros(3), L.ones(3)),
    lambda L: L.nn.functional.huber_loss(L.zeros(3), L.ones(3), delta=0.0),
    lambda L: L.nn.HuberLoss(delta=-1.0)(L.zeros(3), L.ones(3)),
])
def test_smooth_l1_and_huber_refuse_a_negative_beta_or_delta_as_torch(call):
    """The DQN's loss: a RuntimeError with PyTorch's message (tinytrain raised ValueError)."""
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError, match=re.escape(str(theirs.value).rstrip("."))):
        call(tt)


RETURN_TYPES = [
    ("max", lambda L, x: x.max(1)), ("min", lambda L, x: L.min(x, 0, keepdim=True)),
    ("sort", lambda L, x: x.sort(1, descending=True)), ("topk", lambda L, x: x.topk(1)),
    ("median", lambda L, x: x.median(0)), ("nanmedian", lambda L, x: x.nanmedian(1)),
    ("nanmedian", lambda L, x: x.long().nanmedian(1)), ("kthvalue", lambda L, x: x.kthvalue(1)),
    ("cummax", lambda L, x: L.cummax(x, 1)), ("cummin", lambda L, x: x.cummin(0)),
    ("histogram", lambda L, x: L.histogram(x[0], 2)), ("max", lambda L, x: x[0, 0].max(0)),
]


@pytest.mark.parametrize("name, op", RETURN_TYPES)
def test_named_results_print_as_torch_return_types(name, op):
    """``policy_net(state).max(1)`` (the DQN's ``.indices`` / ``.values``): a tuple with names,
    printed as PyTorch prints ``torch.return_types.max`` (one field a line) under tinytrain's
    name; tinytrain printed ``max(values=..., indices=...)``, and ``nanmedian`` by the name
    ``median``."""
    data = np.array([[1.0, 3.0, 2.0], [4.0, 0.0, 5.0]], np.float32)
    ours, theirs = op(tt, tt.tensor(data)), op(torch, torch.tensor(data))
    assert type(ours).__name__ == type(theirs).__name__ == name
    assert repr(ours) == str(ours) == repr(theirs).replace("torch.return_types",
                                                           "tinytrain.return_types")
    assert isinstance(ours, tuple) and len(ours) == 2 and ours[1] is getattr(ours, ours._fields[1])
    assert type(ours) is getattr(tt.return_types, name)
    again = pickle.loads(pickle.dumps(ours))
    assert type(again) is type(ours) and repr(again) == repr(ours)


@pytest.mark.parametrize("family, params", [
    ("Categorical", {"probs": [0.25, 0.75]}),
    ("Categorical", {"logits": [[0.5, -1.0, 2.0]]}),
    ("Bernoulli", {"probs": [0.3]}),
    ("Bernoulli", {"logits": 0.2}),
    ("Normal", {"loc": [0.5], "scale": [2.0]}),
])
def test_distributions_expand_as_torch(family, params):
    """``Distribution.expand(batch_shape)`` (a new distribution on expanded views of the
    parameters; gradients reach the original ones), which tinytrain lacked, and the base
    class's ``cdf`` / ``icdf`` / ``enumerate_support`` (NotImplementedError, not an
    AttributeError) and ``sample_n`` (a FutureWarning)."""
    leaves = {lib: {k: lib.tensor(np.array(v, np.float32), requires_grad=True)
                    for k, v in params.items()} for lib in (tt, torch)}
    ours = getattr(tt.distributions, family)(**leaves[tt])
    theirs = getattr(torch.distributions, family)(**leaves[torch])
    shape = (4, *ours.batch_shape) if ours.batch_shape else (3,)
    a, b = ours.expand(shape), theirs.expand(torch.Size(shape))
    assert type(a) is type(ours) and a.batch_shape == tuple(b.batch_shape) == shape
    assert repr(a) == repr(b) and a._validate_args == b._validate_args
    value = b.sample()
    lp, tlp = a.log_prob(tt.tensor(value.numpy())), b.log_prob(value)
    np.testing.assert_allclose(lp.detach().numpy(), tlp.detach().numpy(), rtol=1e-6)
    assert a.sample((2,)).shape == tuple(b.sample((2,)).shape)
    (lp * tt.arange(1.0, lp.numel() + 1).reshape(lp.shape)).sum().backward()
    (tlp * torch.arange(1.0, tlp.numel() + 1).reshape(tlp.shape)).sum().backward()
    for k in params:
        np.testing.assert_allclose(leaves[tt][k].grad.numpy(), leaves[torch][k].grad.numpy(),
                                   rtol=1e-5, atol=1e-7, err_msg=k)
    with pytest.raises(RuntimeError, match="expanded size"):  # (4 or 3 to 5: no broadcast)
        b.expand((5, 2))
    with pytest.raises(RuntimeError, match="expanded size"):
        a.expand((5, 2))
    if family != "Normal":
        for method in ("cdf", "icdf"):
            with pytest.raises(NotImplementedError):
                getattr(theirs, method)(value)
            with pytest.raises(NotImplementedError):
                getattr(ours, method)(tt.tensor(value.numpy()))
    assert ours.has_enumerate_support == theirs.has_enumerate_support
    if not theirs.has_enumerate_support:
        with pytest.raises(NotImplementedError):
            theirs.enumerate_support()
        with pytest.raises(NotImplementedError):
            ours.enumerate_support()
    (drawn, ours_warned), (tdrawn, theirs_warned) = (_warned(lambda d=d: d.sample_n(3))
                                                     for d in (ours, theirs))
    assert drawn.shape == tuple(tdrawn.shape) and ours_warned[0][0] is FutureWarning
    assert [w[:2] for w in ours_warned] == [w[:2] for w in theirs_warned]


def test_a_subclass_with_its_own_init_must_define_expand_as_in_torch():
    for D, L in ((tt.distributions, tt), (torch.distributions, torch)):
        half = L.tensor([0.5])

        class Coin(D.Bernoulli):
            def __init__(self, half=half):
                super().__init__(probs=half)
        with pytest.raises(NotImplementedError, match="Subclass Coin of Bernoulli that defines "
                                                      "a custom __init__ method must also"):
            Coin().expand((2,))
