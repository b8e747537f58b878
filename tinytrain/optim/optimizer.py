"""``Optimizer``: parameter groups, per-parameter state, zero_grad and state dicts."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from tinytrain import backend
from tinytrain.autograd import enable_grad
from tinytrain.tensor import ShapeError, Tensor

#: PyTorch options that change the update. A saved state dict that turns one on is refused by
#: an optimizer that lacks it (an optimizer class of one's own); the built-in ones have those
#: PyTorch's have (Adam: amsgrad, maximize, decoupled_weight_decay; SGD: maximize; ...).
_TORCH_ONLY_OPTIONS = ("amsgrad", "maximize", "decoupled_weight_decay")
#: Keys of PyTorch's groups that describe its implementation or the parameters, not settings:
#: loaded only into an optimizer whose defaults have them.
_TORCH_BOOKKEEPING = frozenset({*_TORCH_ONLY_OPTIONS, "foreach", "fused", "capturable",
                                "differentiable"})


def _switched_on(value: Any) -> bool:
    """A saved option that is on: True, or a true number (1, ``np.True_``)."""
    return isinstance(value, bool | int | np.bool_ | np.integer) and bool(value)


class Optimizer:
    """Base class: holds ``param_groups`` (dicts with ``"params"`` and hyper-parameters)
    and ``state`` (per-parameter buffers such as momentum).

    Parameters with ``requires_grad=False`` (frozen layers) are accepted, as in PyTorch:
    they never get a ``.grad``, and ``step()`` skips every parameter whose ``.grad`` is None.

    The groups also carry PyTorch's implementation options, with PyTorch's defaults, where
    PyTorch's optimizer has them: ``foreach`` and ``fused`` (speed options: tinytrain has one
    implementation per device, which gives the same numbers, so any value is accepted, but
    not both True), ``capturable`` and ``differentiable`` (only False: CUDA-graph capture
    and differentiating through the step are not in tinytrain).
    """

    _step_count = 0  # step() calls so far (a scheduler stepped before any warns, as PyTorch's)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each optimizer's ``step`` counts its calls in ``_step_count`` and takes PyTorch's
        ``closure``: ``step(closure)`` first calls ``closure()`` (which recomputes the loss
        and its gradients) with gradients on, and returns what it returned."""
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None:
            own_arguments = len(inspect.signature(step).parameters) > 1  # (beyond self)

            @functools.wraps(step)
            def counted(self: Optimizer, *args: Any, **kw: Any) -> Any:
                self._step_count += 1
                if own_arguments:  # a subclass's step(self, closure) or step(self, scale)
                    return step(self, *args, **kw)
                closure = args[0] if args else kw.pop("closure", None)
                loss = None
                if closure is not None:
                    with enable_grad():
                        loss = closure()
                result = step(self, *args[1:], **kw)
                return loss if closure is not None else result

            cls.step = counted  # type: ignore[method-assign]

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):  # (iterating it would give its rows)
            raise TypeError(f"params argument given to {type(self).__name__} should be an "
                            f"iterable of Tensors or dicts, but got a Tensor; pass [tensor]")
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = []
        for g in groups:
            self.add_param_group(g)
        # as PyTorch's: self.state[p] of a parameter not stepped yet is a new empty dict, so a
        # step() of one's own can write `state = self.state[p]; if not state: ...`
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)

    def __repr__(self) -> str:
        """PyTorch's text: each group's settings, sorted by name (``print(optimizer)``)."""
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            text += "".join(f"    {k}: {group[k]}\n" for k in sorted(group) if k != "params")
        return text + ")"

    @property
    def _user(self) -> bool:
        """An optimizer class written outside tinytrain (its own ``step``, its own state)."""
        return not type(self).__module__.startswith("tinytrain.")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (``{"params": [...], "lr": ...}``; missing settings from the
        defaults), e.g. to train layers unfrozen later. A parameter can be in one group only."""
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        names = {}
        if params and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                          for p in params):  # named_parameters(), as PyTorch 2.13 takes:
            names = {"param_names": [n for n, _ in params]}  # its state_dict keeps the names
            params = [p for _, p in params]
        group = {**names, **self.defaults, **param_group, "params": params}
        self._check_options(group)
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__} can only optimize Tensors, but one "
                                f"of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor "
                                 f"(shape {p.shape}); pass parameters or detached leaves")
            if id(p) in taken:
                raise ValueError(f"{type(self).__name__}: some parameters appear in more than "
                                 f"one parameter group (shape {p.shape})")
        if len({id(p) for p in group["params"]}) != len(group["params"]):
            warnings.warn(f"{type(self).__name__} contains a parameter group with duplicate "
                          "parameters: each copy is stepped, so such a parameter moves twice "
                          "per step (PyTorch warns the same)", UserWarning, stacklevel=3)
        self.param_groups.append(group)

    def _check_options(self, group: dict[str, Any]) -> None:
        """Refuse the implementation options tinytrain cannot honour (see the class)."""
        name = type(self).__name__
        for key, what in (("differentiable", "differentiating through the optimizer step"),
                          ("capturable", "capturing the step in a CUDA graph")):
            if _switched_on(group.get(key)):
                raise NotImplementedError(f"{name}: {key}=True ({what}) is not supported by "
                                          f"tinytrain; pass {key}=False")
        if _switched_on(group.get("fused")) and _switched_on(group.get("foreach")):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient (default) or fill it with zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad._data[...] = 0

    def step(self) -> None:
        raise NotImplementedError

    def _updates(self, new_state: Callable[[Any, dict[str, Any]], dict[str, Any]],
                 l2: bool = True) -> Iterator[tuple[dict[str, Any], Tensor, Any, dict[str, Any]]]:
        """Every parameter that has a gradient, as ``(group, p, g, state)``, for a ``step()``
        that then updates ``p._data`` (the array) in place.

        ``g`` is the gradient array (negated when the group has ``maximize``), plus
        ``weight_decay * p`` when ``l2`` (PyTorch's coupled weight decay; pass False where
        the update decays the weights itself). ``state`` is
        ``p``'s: made at the first step as ``{"step": 0, **new_state(p._data, group)}``, and
        its ``"step"`` counted. After each update ``p``'s version is bumped: a graph that
        saved ``p`` must see the write.
        """
        for group in self.param_groups:
            wd = group.get("weight_decay", 0.0) if l2 else 0.0
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = self._grad(p)
                if group.get("maximize"):  # ascend: PyTorch negates the gradient first
                    g = -g
                if wd:
                    g = g + wd * p._data
                state = self.state.setdefault(p, {})
                if not state:
                    state.update(step=0, **new_state(p._data, group))
                state["step"] += 1
                yield group, p, g, state
                p._version_counter[0] += 1

    def _grad(self, p: Tensor) -> Any:
        """``p.grad``'s array, checked: a gradient assigned by hand with another shape would
        otherwise fail deep in the update with NumPy's broadcast error (PyTorch refuses the
        assignment itself)."""
        g = p.grad._data
        if tuple(g.shape) != p.shape:
            raise ShapeError(f"{type(self).__name__}.step: a parameter of shape {p.shape} has "
                             f"a .grad of shape {tuple(g.shape)}")
        for name, v in self.state.get(p, {}).items():  # (a model moved after a step: its
            v = v._data if isinstance(v, Tensor) else v     # state stayed behind)
            if getattr(v, "ndim", 0) and type(v) is not type(p._data):
                raise RuntimeError(
                    f"{type(self).__name__}.step: the state {name!r} of a parameter of shape "
                    f"{p.shape} is on {backend.device_of(v)}, the parameter on {p.device} (the "
                    f"model was moved after the optimizer's first step); move the model first, "
                    f"or move the state: opt.load_state_dict(opt.state_dict())")
        return g

    def _params(self) -> list[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self) -> dict[str, Any]:
        """Hyper-parameters and state, with parameters referred to by their index."""
        index = {id(p): i for i, p in enumerate(self._params())}
        state = {index[id(p)]: {k: (v.copy() if hasattr(v, "copy") else v) for k, v in s.items()}
                 for p, s in self.state.items()}
        groups = [{k: v for k, v in g.items() if k != "params"} | {
            "params": [index[id(p)] for p in g["params"]]} for g in self.param_groups]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        params = self._params()
        groups = state_dict["param_groups"]
        sizes = [len(g["params"]) for g in groups]
        if sizes != [len(own["params"]) for own in self.param_groups]:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the saved state has parameter groups of "
                f"sizes {[len(g['params']) for g in groups]} but this optimizer has "
                f"{[len(g['params']) for g in self.param_groups]}"
            )
        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)  # checked whole first
        for i, s in state_dict["state"].items():
            if not 0 <= int(i) < len(params):
                raise ValueError(f"{type(self).__name__}.load_state_dict: the saved state has "
                                 f"parameter index {i}, but this optimizer has {len(params)} "
                                 "parameters")
            p = params[int(i)]
            state[p] = {k: self._loaded(int(i), p, k, v) for k, v in s.items()}
        for g in groups:  # a PyTorch state dict's options this optimizer lacks: only when off
            on = [k for k in _TORCH_ONLY_OPTIONS if _switched_on(g.get(k))
                  and k not in self.defaults]
            if on:
                raise ValueError(f"{type(self).__name__}.load_state_dict: the saved state sets "
                                 f"{on[0]}=True, which tinytrain's {type(self).__name__} does "
                                 "not have")
            self._check_options({k: v for k, v in g.items() if k in self.defaults})
        for g, own in zip(groups, self.param_groups):  # (with a scheduler's keys: initial_lr...)
            own.update({k: v for k, v in g.items() if k != "params" and (
                k not in _TORCH_BOOKKEEPING or k in self.defaults)})
        self.state = state

    def _state_shape(self, p: Tensor) -> tuple[int, ...]:
        """The shape of ``p``'s saved buffers (``load_state_dict`` checks it): ``p``'s own."""
        return p.shape

    def _loaded(self, i: int, p: Tensor, k: str, v: Any) -> Any:
        """The saved state value ``v`` (key ``k``) of parameter ``p`` (index ``i``), as this
        optimizer keeps it: PyTorch's tensors as arrays (``"step"`` as an int), every array
        copied onto ``p``'s device (one with dimensions checked against ``_state_shape(p)``
        and in ``p``'s floating dtype), and each item of a list or tuple (LBFGS's history)
        the same way, as PyTorch casts inside them."""
        if isinstance(v, list | tuple):
            return type(v)(self._loaded(i, p, k, item) for item in v)
        tensor = isinstance(v, Tensor) and self._user  # a user optimizer's own
        #                                 Tensor state stays one; built-ins keep arrays
        v = v._data if tensor else v
        if hasattr(v, "__array__") and not hasattr(v, "astype"):  # PyTorch's tensors
            v = np.asarray(v)
            v = int(v) if k == "step" and v.ndim == 0 else v
        if not (hasattr(v, "dtype") and hasattr(v, "ndim")):  # a number, None, ...
            return Tensor(v) if tensor else v
        if v.ndim:  # a built-in buffer must fit its parameter (a subclass's own Tensor
            # state may be factored: [rows], [m, 1]); a 0-d one (LBFGS's ro, H_diag) too goes
            shape = self._state_shape(p)  # onto the parameter's device, in its own copy
            if tuple(v.shape) != shape and not tensor:
                raise ShapeError(
                    f"{type(self).__name__}.load_state_dict: parameter {i} has shape "
                    f"{p.shape} but its saved {k!r} has shape {tuple(v.shape)}"
                    + (f" (expected {shape})" if shape != p.shape else "")
                    + " (a state saved for another model?)")
        # floating buffers in the parameter's dtype, as PyTorch; a 0-d one (NAdam's float32
        # mu_product) keeps its own, so that reloading does not change the trajectory
        dtype = p.dtype if v.dtype.kind == "f" and v.ndim else v.dtype
        v = backend.to_device(v, p.device).astype(dtype, copy=True)
        return Tensor(v) if tensor else v
