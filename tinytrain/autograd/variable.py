"""``torch.autograd.Variable``: the pre-0.4 wrapper, kept by PyTorch as a name for Tensor.

Old programs (many GAN and RL repositories) still write ``Variable(x)``,
``Variable(x, requires_grad=True)`` and ``isinstance(x, Variable)``. As in PyTorch 2,
``Variable(t)`` returns a plain Tensor: ``t.detach()`` (the same memory, a new leaf, no
``grad_fn``) with ``requires_grad`` set as asked, and every Tensor is a Variable.
"""

from __future__ import annotations

import warnings
from typing import Any


class _VariableMeta(type):
    def __instancecheck__(cls, other: Any) -> bool:
        from tinytrain.tensor import Tensor

        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)`` -> Tensor.

    Args:
        data: a Tensor of any shape ``[*]``; the result is ``data.detach()`` (the same memory).
            None gives an empty float tensor ``[0]`` of the default dtype, as PyTorch's.
        requires_grad: whether the new leaf requires grad (float dtypes only, RuntimeError
            otherwise, as ``requires_grad_``).
        volatile: removed in PyTorch 0.4: a UserWarning, no effect.
    """

    def __new__(cls, data: Any = None, requires_grad: bool = False,
                volatile: bool = False) -> Any:
        import tinytrain as tt

        if data is None:
            out = tt.empty(0)
        elif isinstance(data, tt.Tensor):
            out = data.detach()
        else:
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "torch.no_grad():` instead.", UserWarning, stacklevel=2)
        out.requires_grad_(bool(requires_grad))
        return out
