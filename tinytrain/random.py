"""The package's random number generators.

One NumPy ``Generator`` serves every random draw of tinytrain that is not given a generator
of its own (``randn``, parameter initialisation, dropout, shuffling without an explicit seed):
the *global stream*, reseeded by :func:`manual_seed`. Draws happen on the CPU and are then
moved to the tensor's device, so a seed gives the same numbers on ``"cpu"`` and ``"cuda"``.

:class:`Generator` is PyTorch's ``torch.Generator``: a stream of its own, for the functions
that take ``generator=`` (``tt.randn(3, generator=g)``, ``random_split``, the samplers, ...).
It wraps a NumPy ``Generator`` (PCG64), so the numbers are not PyTorch's (its Mersenne
Twister cannot be matched); what holds is that the same seed gives the same sequence, and
that drawing from one generator leaves every other stream, the global one too, as it was.
``tt.default_generator`` is the global stream as a :class:`Generator`.
"""

from __future__ import annotations

import numbers
import secrets
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain._func_state import check_random as _func_check_random
from tinytrain._func_state import levels as _func_levels
from tinytrain.backend import Device

#: A fresh :class:`Generator`'s seed: PyTorch's (``torch.Generator().initial_seed()``).
DEFAULT_SEED = 67280421310721

#: :meth:`Generator.get_state`'s layout: (field, bytes), little-endian unsigned integers.
_STATE_LAYOUT = (("seed", 8), ("state", 16), ("inc", 16), ("has_uint32", 1), ("uinteger", 4))


def seed_value(seed: Any) -> int:
    """``seed`` as the generator's seed in ``[0, 2**64)``, or a TypeError/ValueError that says
    what was wrong with it (see :func:`manual_seed`)."""
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise TypeError(f"manual_seed: the seed must be an integer, got {seed!r}") from None
    if not -(1 << 63) <= value < 1 << 64:  # (taken modulo 2**64 it would alias another seed)
        raise ValueError(f"manual_seed: seed {value} is out of range: it must be in "
                         f"[-2**63, 2**64)")
    return value % (1 << 64)


class Generator:
    """A random stream of its own, as ``torch.Generator``: pass it as ``generator=`` to
    draw from it instead of the global stream (``tt.manual_seed``).

    ``tt.Generator().manual_seed(42)`` gives the same sequence every time; a fresh generator
    starts from PyTorch's fixed seed (:data:`DEFAULT_SEED`). The numbers are NumPy's PCG64,
    not PyTorch's. Every draw is made on the CPU and moved to the tensor's device, so
    ``device`` (``"cpu"`` or ``"cuda"``) is kept for PyTorch's code and changes no number;
    a ``"cuda"`` generator needs CUDA to be available, as PyTorch's.
    A generator pickles and deep-copies with its state (the copy continues the sequence).
    """

    def __init__(self, device: Any = "cpu") -> None:
        self.device = Device(device)
        if self.device.type == "cuda" and not backend.cuda_is_available():
            raise RuntimeError(f"Generator(device={str(self.device)!r}): CUDA is not "
                               "available here (CuPy and a GPU are needed)")
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream from ``seed`` (an integer in ``[-2**63, 2**64)``; a negative one
        is taken modulo 2**64, as PyTorch does) and return this generator."""
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        self._seed = seed_value(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Restart the stream from a non-deterministic seed (the operating system's entropy)
        and return that seed."""
        seed = secrets.randbits(64)
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        """The seed the stream was last started from (:meth:`manual_seed`, :meth:`seed`)."""
        return self._seed

    def get_state(self) -> Any:
        """The stream's state, an opaque uint8 Tensor ``[45]`` for :meth:`set_state` (the
        seed and NumPy's PCG64 state; not PyTorch's byte layout, which cannot be loaded)."""
        from tinytrain.tensor import Tensor

        pcg = self._rng.bit_generator.state
        fields = {"seed": self._seed, **pcg["state"], "has_uint32": pcg["has_uint32"],
                  "uinteger": pcg["uinteger"]}
        raw = b"".join(fields[name].to_bytes(size, "little") for name, size in _STATE_LAYOUT)
        return Tensor(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state: Any) -> Generator:
        """Continue from a state returned by :meth:`get_state` (of this generator or another),
        and return this generator."""
        from tinytrain.tensor import Tensor

        size = sum(n for _, n in _STATE_LAYOUT)
        if not isinstance(new_state, Tensor) or new_state.dtype != np.uint8:
            got = new_state.dtype if isinstance(new_state, Tensor) else type(new_state).__name__
            raise TypeError(f"set_state: expected a uint8 Tensor from Generator.get_state(), "
                            f"got {got}")
        if new_state.shape != (size,):
            raise ValueError(f"set_state: expected a tinytrain Generator state of {size} "
                             f"bytes but got shape {new_state.shape} (a PyTorch state cannot "
                             f"be loaded: the generators differ)")
        raw, fields, start = bytes(new_state.numpy()), {}, 0
        for name, n in _STATE_LAYOUT:
            fields[name], start = int.from_bytes(raw[start:start + n], "little"), start + n
        self._rng.bit_generator.state = {
            "bit_generator": "PCG64", "state": {"state": fields["state"], "inc": fields["inc"]},
            "has_uint32": fields["has_uint32"], "uinteger": fields["uinteger"]}
        self._seed = fields["seed"]
        return self

    def __repr__(self) -> str:
        return f"tinytrain.Generator(device='{self.device}', initial_seed={self._seed})"


#: The global stream (``tt.default_generator``): ``tt.manual_seed`` restarts it.
_default = Generator().manual_seed(0)


def manual_seed(seed: int) -> Generator:
    """Reseed the global stream (like ``torch.manual_seed``) and return it
    (``tt.default_generator``). Any integer in PyTorch's range, ``[-2**63, 2**64)``, works (a
    negative one is taken modulo 2**64, as PyTorch does), also a one-element tensor."""
    return _default.manual_seed(seed_value(seed))


def seed() -> int:
    """Reseed the global stream from the operating system's entropy and return the seed
    (``torch.seed``)."""
    return _default.seed()


def initial_seed() -> int:
    """The seed the global stream was last started from (0 until reseeded)."""
    return _default.initial_seed()


def default_generator() -> np.random.Generator:
    """The NumPy generator of the global stream, which tinytrain's random functions draw
    from when given no generator. (A function, unlike ``torch.random.default_generator``:
    that one is ``tt.default_generator``, a :class:`Generator`.)"""
    if _func_levels:  # (a vmap with randomness='error' refuses random draws)
        _func_check_random("a random operation")
    return _default._rng


def numpy_generator(generator: Any, who: str) -> np.random.Generator:
    """The NumPy generator that a random function given ``generator=`` draws from: the global
    stream's for None, a :class:`Generator`'s own, or a ``numpy.random.Generator`` itself;
    ``who`` (the function) names the caller in the TypeError for anything else."""
    if _func_levels:  # (a vmap with randomness='error' refuses random draws)
        _func_check_random(who)
    if generator is None:
        return _default._rng
    if isinstance(generator, Generator):
        return generator._rng
    if isinstance(generator, np.random.Generator):
        return generator
    kind = f"{type(generator).__module__}.{type(generator).__qualname__}"
    raise TypeError(f"{who}: generator must be None or a tt.Generator (e.g. "
                    f"tt.Generator().manual_seed(0)), got {kind}")


def get_rng_state() -> dict[str, Any]:
    """The global stream's state, a plain dict (checkpoints save it)."""
    return _default._rng.bit_generator.state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore a state returned by :func:`get_rng_state`."""
    _default._rng.bit_generator.state = state
