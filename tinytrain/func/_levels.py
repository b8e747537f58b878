"""A transform's *level*: what one running ``grad``/``vjp``/``jvp`` (kind ``"grad"``) or
``vmap`` (kind ``"vmap"``) knows about the tensors it sees (the DESIGN section of
:mod:`tinytrain.func` says how the levels make the transforms compose).

* The inputs it differentiates become its *private* leaves (``_func_level`` names the level):
  a detached copy that requires grad, or, for an input that already requires grad (an outer
  transform's or the user's), a view of it, so that outer levels can differentiate through.
* A result depends on an *outer* level when its graph reaches a leaf that is not private to
  this level nor to a level that has ended (a user's tensor that requires grad, an outer
  transform's private leaf): then its graph is kept, else it is detached, as PyTorch's
  transforms unwrap their results.
* Arrays born while the level runs are recorded (``Tensor.__init__``), so that an in-place
  write to a tensor the function *captured* (neither born inside nor one of the level's
  inputs) raises instead of corrupting it (:meth:`Level.check_write`).
"""

from __future__ import annotations

from typing import Any

from tinytrain._func_state import levels
from tinytrain.autograd.function import AccumulateGrad, _root
from tinytrain.tensor import Tensor


class Level:
    """One running transform; a context manager that makes it the innermost level."""

    def __init__(self, kind: str, allowed: list[Any] = (), randomness: str | None = None
                 ) -> None:
        self.kind = kind
        self.randomness = randomness
        self.active = False
        self.births: set[int] = set()
        # the memory of the tensors the transform was given (may be written in place)
        self.allowed = {id(_root(t._data)) for t in allowed if isinstance(t, Tensor)}

    def __enter__(self) -> Level:
        levels.append(self)
        self.active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        levels.pop()
        self.active = False
        if levels:  # born inside this level: born inside the one around it too
            levels[-1].births |= self.births

    # ------------------------------------------------------------ in-place writes

    def born(self, array: Any) -> None:
        self.births.add(id(_root(array)))

    def check_write(self, t: Tensor, name: str) -> None:
        """An in-place write to ``t``'s memory: fine if that memory was born inside the
        innermost level, or is an input of each level out to one where it was born (or of
        every level: the user's own tensor); else the error of the level that captured it."""
        memory = id(_root(t._data))
        for level in reversed(levels):
            if memory in level.births:
                return
            if memory not in level.allowed:
                level.refuse(name)

    def refuse(self, name: str) -> None:
        op = name.removeprefix("__").removesuffix("__")
        if self.kind == "grad":
            raise RuntimeError(
                f"During a grad (vjp, jvp, grad, etc) transform, the function provided "
                f"attempted to call in-place operation ({op}) that would mutate a captured "
                f"Tensor. This is not supported; please rewrite the function being transformed "
                f"to explicitly accept the mutated Tensor(s) as inputs.")
        raise RuntimeError(
            f"vmap: in-place operation ({op}) on a Tensor that the function captured (or got "
            f"with in_dims=None): tinytrain's vmap runs the function once per sample, so the "
            f"write would happen once per sample (PyTorch raises when the value written is "
            f"batched and writes once when it is not). Use an out-of-place operation, or pass "
            f"the tensor as a batched input.")

    # ------------------------------------------------------------ differentiation

    def differentiable(self, x: Any) -> Tensor:
        """``x`` as this level's input to differentiate (module docstring)."""
        if not isinstance(x, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        if x.requires_grad:
            return x.view_as(x)
        leaf = x.detach().requires_grad_(True)
        leaf._func_level = self
        return leaf

    def private(self, t: Tensor) -> Tensor:
        """Mark the leaf ``t`` (a dummy of the double-vjp trick) as this level's own."""
        t._func_level = self
        return t

    def reaches_outer(self, tensors: Any) -> bool:
        """Whether the graph of any of ``tensors`` reaches a leaf of an outer level (module
        docstring)."""
        stack = [t._grad_node() for t in tensors if isinstance(t, Tensor) and t.requires_grad]
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if type(node) is AccumulateGrad:
                owner = getattr(node.tensor, "_func_level", None)
                if owner is None or (owner.active and owner is not self):
                    return True
                continue
            stack.extend(n for n in node.next_functions if n is not None)
        return False

    def unwrap(self, x: Any) -> Any:
        """A result as it leaves the level: detached unless it depends on an outer level."""
        if isinstance(x, Tensor) and x.requires_grad and not self.reaches_outer((x,)):
            return x.detach()
        return x
