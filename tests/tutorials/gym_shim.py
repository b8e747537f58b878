"""A test-only stand-in for ``gym`` / ``gymnasium``: the CartPole environment only.

Reinforcement-learning programs next to this file import ``gym`` or ``gymnasium``, which are
not installed (nothing is downloaded here); tests/test_ports10b.py installs a module made by
:func:`module` under that name in ``sys.modules``, so the programs keep their import lines.

``make("CartPole-v1")`` / ``make("CartPole-v0")`` give gymnasium's ``CartPoleEnv`` (the
equations of ``gymnasium/envs/classic_control/cartpole.py``: Euler steps of 0.02 s, pole
angle limit 12 degrees, cart position limit 2.4; observations float32 ``[4]``) under a
``TimeLimit`` of 500 steps (v1; reward threshold 475) or 200 (v0; threshold 195), with
gymnasium's API: ``reset(seed=None, options=None) -> (obs, info)``, ``step(action) -> (obs,
reward, terminated, truncated, info)``, ``action_space`` ``Discrete(2)`` whose ``sample()``
gives a NumPy int64, ``spec.reward_threshold``. ``module("gym", old_api=True)`` is gym 0.25
and older: ``env.seed(seed)``, ``reset() -> obs`` and ``step(action) -> (obs, reward, done,
info)`` (``done`` is also True at the time limit, ``info["TimeLimit.truncated"]`` says so).

Random numbers are gymnasium's: a seed makes ``np.random.default_rng(seed)`` (what
``gymnasium.utils.seeding.np_random`` makes: PCG64 of ``SeedSequence(seed)``), and
``reset`` draws the state uniform in [-0.05, 0.05). One difference: a generator used before
any seed was given (``env.reset()`` without a seed, ``env.action_space.sample()``) takes its
seed from NumPy's global generator, not from the operating system's entropy, so that two
runs started after the same ``np.random.seed`` see the same episodes.
"""

from __future__ import annotations

import math
import types
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np


def _unseeded() -> np.random.Generator:
    return np.random.default_rng(int(np.random.randint(2**31 - 1)))


class Discrete:
    """``gymnasium.spaces.Discrete(n)``: the integers ``0 .. n-1``."""

    def __init__(self, n: int, start: int = 0) -> None:
        self.n, self.start = np.int64(n), np.int64(start)
        self.shape, self.dtype = (), np.dtype(np.int64)
        self._np_random: np.random.Generator | None = None

    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self._np_random = _unseeded()
        return self._np_random

    def seed(self, seed: int | None = None) -> list[int | None]:
        self._np_random = np.random.default_rng(seed)
        return [seed]

    def sample(self) -> np.int64:
        return self.start + self.np_random.integers(self.n)

    def contains(self, x: Any) -> bool:
        if isinstance(x, int):
            as_int = np.int64(x)
        elif isinstance(x, np.generic | np.ndarray) and (
                np.issubdtype(x.dtype, np.integer) and x.shape == ()):
            as_int = np.int64(x)
        else:
            return False
        return bool(self.start <= as_int < self.start + self.n)

    def __repr__(self) -> str:
        return f"Discrete({self.n})"


class Box:
    """``gymnasium.spaces.Box(low, high, dtype=float32)``."""

    def __init__(self, low: np.ndarray, high: np.ndarray, dtype=np.float32) -> None:
        self.low, self.high = np.asarray(low, dtype), np.asarray(high, dtype)
        self.shape, self.dtype = self.low.shape, np.dtype(dtype)

    def __repr__(self) -> str:
        return f"Box({self.low}, {self.high}, {self.shape}, {self.dtype})"


class CartPoleEnv:
    """gymnasium's ``CartPoleEnv``: a pole on a cart pushed left (action 0) or right (1)
    with a force of 10 N; reward 1 a step until the pole leans more than 12 degrees or the
    cart leaves [-2.4, 2.4]."""

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 50}

    def __init__(self, render_mode: str | None = None) -> None:
        self.gravity = 9.8
        self.masscart = 1.0
        self.masspole = 0.1
        self.total_mass = self.masspole + self.masscart
        self.length = 0.5  # actually half the pole's length
        self.polemass_length = self.masspole * self.length
        self.force_mag = 10.0
        self.tau = 0.02  # seconds between state updates
        self.kinematics_integrator = "euler"
        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4
        high = np.array([self.x_threshold * 2, np.inf, self.theta_threshold_radians * 2,
                         np.inf], dtype=np.float32)
        self.action_space = Discrete(2)
        self.observation_space = Box(-high, high, dtype=np.float32)
        self.render_mode = render_mode
        self.state: np.ndarray | None = None
        self.steps_beyond_terminated: int | None = None
        self._np_random: np.random.Generator | None = None

    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self._np_random = _unseeded()
        return self._np_random

    @property
    def unwrapped(self) -> CartPoleEnv:
        return self

    def step(self, action):
        assert self.action_space.contains(action), f"{action!r} ({type(action)}) invalid"
        assert self.state is not None, "Call reset before using step method."
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta = math.cos(theta)
        sintheta = math.sin(theta)
        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta
                ) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = np.array((x, x_dot, theta, theta_dot), dtype=np.float64)
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians
                          or theta > self.theta_threshold_radians)
        if not terminated:
            reward = 1.0
        elif self.steps_beyond_terminated is None:
            self.steps_beyond_terminated = 0  # the pole just fell
            reward = 1.0
        else:
            if self.steps_beyond_terminated == 0:
                warnings.warn("You are calling 'step()' even though this environment has "
                              "already returned terminated = True. You should always call "
                              "'reset()' once you receive 'terminated = True' -- any further "
                              "steps are undefined behavior.", stacklevel=2)
            self.steps_beyond_terminated += 1
            reward = 0.0
        return np.array(self.state, dtype=np.float32), reward, terminated, False, {}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._np_random = np.random.default_rng(seed)
        options = options or {}
        low, high = options.get("low", -0.05), options.get("high", 0.05)
        self.state = self.np_random.uniform(low=low, high=high, size=(4,))
        self.steps_beyond_terminated = None
        return np.array(self.state, dtype=np.float32), {}

    def render(self):
        raise NotImplementedError("gym_shim draws nothing (the tests do not pass --render)")

    def close(self) -> None:
        pass


@dataclass
class EnvSpec:
    id: str
    max_episode_steps: int
    reward_threshold: float


#: The environments :func:`make` knows (a test may lower ``reward_threshold``).
registry = {"CartPole-v0": EnvSpec("CartPole-v0", 200, 195.0),
            "CartPole-v1": EnvSpec("CartPole-v1", 500, 475.0)}


class TimeLimit:
    """``gymnasium.wrappers.TimeLimit``: ``truncated`` after ``spec.max_episode_steps``."""

    def __init__(self, env: CartPoleEnv, spec: EnvSpec) -> None:
        self.env, self.spec = env, spec
        self._elapsed_steps: int | None = None

    action_space = property(lambda self: self.env.action_space)
    observation_space = property(lambda self: self.env.observation_space)
    np_random = property(lambda self: self.env.np_random)
    unwrapped = property(lambda self: self.env)

    def step(self, action):
        if self._elapsed_steps is None:  # (gymnasium's OrderEnforcing)
            raise RuntimeError("Cannot call env.step() before calling env.reset()")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._elapsed_steps += 1
        if self._elapsed_steps >= self.spec.max_episode_steps:
            truncated = True
        return observation, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._elapsed_steps = 0
        return self.env.reset(seed=seed, options=options)

    def render(self):
        return self.env.render()

    def close(self) -> None:
        self.env.close()


class OldApi(TimeLimit):
    """gym 0.25 and older: ``seed``, ``reset() -> obs``, ``step -> (obs, reward, done,
    info)``; other attributes are the environment's (gym's wrappers forwarded them)."""

    def seed(self, seed: int | None = None) -> list[int | None]:
        self.env._np_random = np.random.default_rng(seed)
        return [seed]

    def reset(self, **kwargs):
        return super().reset(**kwargs)[0]

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if truncated and not terminated:
            info["TimeLimit.truncated"] = True
        return observation, reward, terminated or truncated, info

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.env, name)


def module(name: str = "gymnasium", old_api: bool = False) -> types.ModuleType:
    """A module to install as ``sys.modules[name]``: ``make``, ``spaces``, ``Env`` and
    ``__version__`` (1.0.0 for gymnasium's API, 0.25.2 for gym's old one)."""
    mod = types.ModuleType(name, f"gym_shim.py standing in for {name}")

    def make(id: str, render_mode: str | None = None, **kwargs):
        if id not in registry:
            raise ValueError(f"gym_shim has {sorted(registry)}, not {id!r}")
        if kwargs:
            raise TypeError(f"gym_shim's make takes no {sorted(kwargs)}")
        return (OldApi if old_api else TimeLimit)(CartPoleEnv(render_mode), registry[id])

    mod.make = make
    mod.spaces = types.SimpleNamespace(Discrete=Discrete, Box=Box)
    mod.Env = CartPoleEnv
    mod.__version__ = "0.25.2" if old_api else "1.0.0"
    return mod
