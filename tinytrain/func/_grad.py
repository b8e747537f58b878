"""The autodiff transforms of :mod:`tinytrain.func`: ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, with ``torch.func``'s signatures, results and
errors, built on tinytrain's reverse-mode engine (``autograd.grad``, with ``create_graph=True``
where an outer level will differentiate the result again). See the package's DESIGN section.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from tinytrain.autograd.grad_mode import enable_grad, is_grad_enabled
from tinytrain.autograd.gradients import grad as _autograd_grad_raw
from tinytrain.func._levels import Level
from tinytrain.func._pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from tinytrain.tensor import Tensor

argnums_t = int | tuple[int, ...]


# ------------------------------------------------------------------ argnums (PyTorch's rules)


def _validate_and_wrap_argnum(argnum: Any, num_args: int) -> int:
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < num_args:
        return argnum
    if -num_args <= argnum < 0:
        return argnum + num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def _slice_argnums(args: tuple[Any, ...], argnums: Any, as_tuple: bool = True) -> Any:
    """The arguments ``argnums`` picks: ``(args[i],)`` (``args[i]`` unless ``as_tuple``) for
    an int, a tuple for a tuple; PyTorch's RuntimeErrors for anything else."""
    if not isinstance(argnums, int | tuple):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, int):
        i = _validate_and_wrap_argnum(argnums, len(args))
        return (args[i],) if as_tuple else args[i]
    wrapped = tuple(_validate_and_wrap_argnum(a, len(args)) for a in argnums)
    if len(wrapped) == 0:
        raise RuntimeError("argnums must be non-empty")
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return tuple(args[i] for i in wrapped)


def _replace_args(args: tuple[Any, ...], new: Any, argnums: Any) -> tuple[Any, ...]:
    """``args`` with the ones ``argnums`` picks replaced by ``new`` (one value for an int)."""
    if isinstance(argnums, int):
        i = _validate_and_wrap_argnum(argnums, len(args))
        return tuple(new if j == i else a for j, a in enumerate(args))
    picked = [_validate_and_wrap_argnum(a, len(args)) for a in argnums]
    return tuple(new[picked.index(j)] if j in picked else a for j, a in enumerate(args))


# ------------------------------------------------------------------ shared pieces


def _zeros_like(t: Tensor) -> Tensor:
    return t.detach().new_zeros(t.shape)


def _autograd_grad(outputs: list[Tensor], inputs: list[Tensor],
                   grad_outputs: list[Tensor] | None = None, create_graph: bool = False,
                   retain_graph: bool = True) -> tuple[Tensor, ...]:
    """``autograd.grad`` over the outputs that require grad, zeros for an input they do not
    reach (PyTorch's ``_autograd_grad`` of torch.func)."""
    if grad_outputs is None:
        pairs = [(o, None) for o in outputs if o.requires_grad]
    else:
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return tuple(_zeros_like(x) for x in inputs)
    outs = [o for o, _ in pairs]
    gos = None if grad_outputs is None else [g for _, g in pairs]
    grads = _autograd_grad_raw(outs, inputs, gos, retain_graph=retain_graph,
                               create_graph=create_graph, allow_unused=True)
    return tuple(_zeros_like(x) if g is None else g for g, x in zip(grads, inputs))


def _unwrap_aux(level: Level, aux: Any) -> Any:
    """``aux`` as it leaves the level: its Tensors unwrapped; anything else is PyTorch's
    RuntimeError (``_undo_create_differentiable``)."""
    def unwrap(x: Any) -> Any:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")
        return level.unwrap(x)
    return tree_map(unwrap, aux)


def _name(func: Callable[..., Any]) -> str:
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def _wraps(func: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``functools.wraps`` that also accepts a callable without ``__name__`` (a module)."""
    def decorate(wrapper: Callable[..., Any]) -> Callable[..., Any]:
        try:
            return functools.wraps(func)(wrapper)
        except (AttributeError, TypeError):
            return wrapper
    return decorate


# ------------------------------------------------------------------ grad


def grad(func: Callable[..., Any], argnums: argnums_t = 0, has_aux: bool = False
         ) -> Callable[..., Any]:
    """``torch.func.grad``: a function that returns the gradient of ``func`` (which must
    return a 0-d Tensor, or ``(0-d Tensor, aux)`` with ``has_aux``) with respect to the
    argument(s) ``argnums`` (an int: the gradient has that argument's structure, a pytree of
    Tensors such as a dict of parameters; a tuple: a tuple of those), plus ``aux`` with
    ``has_aux``. Inputs ``func`` does not use get zeros.

    It composes with itself and the other transforms (``grad(grad(f))``, ``vmap(grad(f))``,
    ``grad`` of a function that calls ``vmap``), and with autograd: a result that depends on
    tensors that require grad outside (captured parameters, an input that requires grad)
    keeps its graph. ``grad`` ignores a ``no_grad`` around it and obeys one inside ``func``.
    An in-place write to a tensor ``func`` captured raises, as PyTorch's.
    """
    @_wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        results = _grad_and_value(func, argnums, has_aux, args, kwargs)
        if has_aux:
            g, (_, aux) = results
            return g, aux
        return results[0]
    return wrapper


def grad_and_value(func: Callable[..., Any], argnums: argnums_t = 0, has_aux: bool = False
                   ) -> Callable[..., Any]:
    """``torch.func.grad_and_value``: as :func:`grad`, returning ``(gradient, value)`` (with
    ``has_aux``: ``(gradient, (value, aux))``), ``value`` the 0-d output of ``func``."""
    @_wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _grad_and_value(func, argnums, has_aux, args, kwargs)
    return wrapper


def _grad_and_value(func: Callable[..., Any], argnums: Any, has_aux: bool,
                    args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    with Level("grad", tree_leaves((args, kwargs))) as level, enable_grad():
        diff_args = _slice_argnums(args, argnums, as_tuple=False)
        diff_args = tree_map(level.differentiable, diff_args)
        args = _replace_args(args, diff_args, argnums)
        output = func(*args, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError("grad_and_value(f)(*args): output of function f should be a "
                                   "tuple: (output, aux) if has_aux is True")
            output, aux = output
        if not isinstance(output, Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                               f"Tensor, got {type(output)}")
        if output.dim() != 0:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                               f"scalar Tensor, got tensor with {output.dim()} dims. Maybe you "
                               f"wanted to use the vjp or jacrev APIs instead?")
        flat_diff, spec = tree_flatten(diff_args)
        create = level.reaches_outer((output,))
        grads = _autograd_grad([output], flat_diff, create_graph=create)
        grad_input = tree_unflatten([level.unwrap(g) for g in grads], spec)
        output = level.unwrap(output)
        if has_aux:
            return grad_input, (output, _unwrap_aux(level, aux))
        return grad_input, output


# ------------------------------------------------------------------ vjp


def _non_empty_tensor_output(output: list[Any], api: str) -> None:
    if (len(output) == 1 and output[0] is None) or len(output) < 1:
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got "
                           f"output = {output})")
    for o in output:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(o)}")


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``torch.func.vjp``: ``(func(*primals), vjp_fn)`` (``(..., aux)`` with ``has_aux``).
    ``vjp_fn(cotangents)`` takes cotangents of the outputs' structure and shapes and returns
    the vector-Jacobian products, a tuple with one per primal (of its structure); it may be
    called many times (the graph is kept), also inside :func:`vmap`, and keeps the graph of
    its result when grad mode is on and something outside needs it (``create_graph``: by
    default whether grad mode is on, as PyTorch's)."""
    traced = _Traced(func, primals, None, has_aux)
    traced.check_float_outputs()
    return ((traced.output, traced.vjp_fn, traced.aux) if has_aux
            else (traced.output, traced.vjp_fn))


def _vjp_with_argnums(func: Callable[..., Any], *primals: Any, argnums: Any = None,
                      has_aux: bool = False) -> tuple[Any, ...]:
    traced = _Traced(func, primals, argnums, has_aux)
    return ((traced.output, traced.vjp_fn, traced.aux) if has_aux
            else (traced.output, traced.vjp_fn))


class _Traced:
    """``func`` run once at ``primals`` inside a level, its inputs ``argnums`` (None: all)
    made differentiable: what ``vjp``, ``jacrev`` and ``jacfwd`` build on. ``output`` and
    ``aux`` are unwrapped; ``flat_out``/``flat_diff`` are the raw outputs and differentiable
    inputs, ``outer`` whether the outputs depend on an outer level."""

    def __init__(self, func: Callable[..., Any], primals: tuple[Any, ...], argnums: Any,
                 has_aux: bool, randomness: str | None = None) -> None:
        with contextlib.ExitStack() as stack:
            if randomness is not None:  # jacfwd: func runs as in a vmap over the basis
                stack.enter_context(Level("vmap", tree_leaves(primals), randomness=randomness))
            level = stack.enter_context(Level("grad", tree_leaves(primals)))
            stack.enter_context(enable_grad())
            if argnums is None:
                diff_primals = tree_map(level.differentiable, primals)
                primals = diff_primals
            else:
                diff_primals = _slice_argnums(primals, argnums, as_tuple=False)
                diff_primals = tree_map(level.differentiable, diff_primals)
                primals = _replace_args(primals, diff_primals, argnums)
            primals_out = func(*primals)
            self.aux = None
            if has_aux:
                if not (isinstance(primals_out, tuple) and len(primals_out) == 2):
                    raise RuntimeError("vjp(f, *primals): output of function f should be a "
                                       "tuple: (output, aux) if has_aux is True")
                primals_out, aux = primals_out
                self.aux = _unwrap_aux(level, aux)
            self.flat_out, self.out_spec = tree_flatten(primals_out)
            _non_empty_tensor_output(self.flat_out, "vjp(f, *primals)")
            self.flat_diff, self.diff_spec = tree_flatten(diff_primals)
            self.level = level
            self.outer = level.reaches_outer(self.flat_out)
            self.output = tree_unflatten([level.unwrap(o) for o in self.flat_out],
                                         self.out_spec)

    def check_float_outputs(self) -> None:
        for o in self.flat_out:
            if o.dtype.kind != "f":
                raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or "
                                   f"complex Tensors, got Tensor with dtype {o.dtype}")

    def flat_vjp(self, cotangents: list[Tensor], retain_graph: bool = True,
                 create_graph: bool | None = None, outputs: list[int] | None = None
                 ) -> tuple[Tensor, ...]:
        """The vector-Jacobian products (one per flat differentiable input) of ``cotangents``
        for the flat outputs ``outputs`` (default: all), their graph kept only when grad
        mode is on (``create_graph=None``) and something outside needs it."""
        if create_graph is None:
            create_graph = is_grad_enabled()
        picked = range(len(self.flat_out)) if outputs is None else outputs
        create = create_graph and (self.outer or any(
            isinstance(c, Tensor) and c.requires_grad for c in cotangents))
        grads = _autograd_grad([self.flat_out[i] for i in picked], self.flat_diff,
                               list(cotangents), create_graph=create,
                               retain_graph=retain_graph)
        return tuple(g if create else g.detach() for g in grads)

    def vjp_fn(self, cotangents: Any, retain_graph: bool = True,
               create_graph: bool | None = None) -> Any:
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != self.out_spec:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as "
                               f"pytree structure of outputs to the function. cotangents: "
                               f"{ct_spec}, primal output: {self.out_spec}")
        return tree_unflatten(self.flat_vjp(flat_ct, retain_graph, create_graph),
                              self.diff_spec)

    def rows(self) -> list[list[list[Tensor]]]:
        """Reverse mode: ``rows[i][j]``, for differentiable input ``i`` and output ``j``, the
        list of the gradients of output ``j``'s elements, in order (one backward each)."""
        rows = [[[] for _ in self.flat_out] for _ in self.flat_diff]
        for j, out in enumerate(self.flat_out):
            flat = out.detach().reshape(-1)
            for e in range(flat.shape[0]):
                basis = flat.new_zeros(flat.shape)
                basis[e] = 1
                for i, g in enumerate(self.flat_vjp([basis.reshape(out.shape)], outputs=[j])):
                    rows[i][j].append(g)
        return rows

    def columns(self) -> list[list[list[Tensor]]]:
        """"Forward mode" by the double-vjp trick: ``columns[i][j]``, for differentiable input
        ``i`` and output ``j``, the list of the derivatives of output ``j`` with respect to
        input ``i``'s elements, in order. One backward with dummy cotangents ``u`` gives
        ``g_i = u^T J_i`` (linear in ``u``); the gradient of ``g_i[k]`` with respect to ``u``
        is column ``k`` of ``J_i`` (one more backward per input element)."""
        level = self.level
        columns = [[[] for _ in self.flat_out] for _ in self.flat_diff]
        live = [j for j, o in enumerate(self.flat_out) if o.requires_grad]
        dummies = [level.private(_zeros_like(self.flat_out[j]).requires_grad_(True))
                   for j in live]
        with enable_grad():
            back = (_autograd_grad_raw([self.flat_out[j] for j in live], self.flat_diff,
                                       dummies, retain_graph=True, create_graph=True,
                                       allow_unused=True)
                    if live else (None,) * len(self.flat_diff))
            for i, (g, x) in enumerate(zip(back, self.flat_diff)):
                flat_g = g.reshape(-1) if g is not None and g.requires_grad else None
                for k in range(x.numel()):
                    derivs = (_autograd_grad_raw(flat_g[k], dummies, retain_graph=True,
                                                 create_graph=self.outer, allow_unused=True)
                              if flat_g is not None else (None,) * len(live))
                    found = dict(zip(live, derivs))
                    for j, out in enumerate(self.flat_out):
                        d = found.get(j)
                        columns[i][j].append(_zeros_like(out) if d is None else d)
        return columns


# ------------------------------------------------------------------ jvp


def _non_empty_list_of_tensors(output: list[Any], api: str, argname: str) -> None:
    if len(output) == 0:
        raise RuntimeError(f"{api}: Expected {argname} to contain at least one Tensor.")
    for out in output:
        if not isinstance(out, Tensor):
            raise RuntimeError(f"{api}: Expected {argname} to only contain Tensors, got "
                               f"{type(out)}")


_JVP = "jvp(f, primals, tangents)"


def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple[Any, ...]:
    """``torch.func.jvp``: ``(func(*primals), J v)`` (``(..., aux)`` with ``has_aux``);
    ``primals`` a tuple (of Tensors, or pytrees of them), ``tangents`` of the same structure
    and shapes; the product has the outputs' structure, zeros for an output that does not
    depend on the primals (``strict=True`` raises).

    Differs from PyTorch in how, not what: tinytrain has no forward-mode AD, so ``J v`` is
    computed in reverse mode by the "double-vjp" trick, the gradient with respect to a dummy
    ``u`` of ``(u^T J) v`` (one forward and two backward passes: every op of ``func`` needs a
    double backward, which tinytrain's ops have, see ``double_backward_ops()``)."""
    return _jvp_with_argnums(func, primals, tangents, None, strict=strict, has_aux=has_aux)


def _jvp_with_argnums(func: Callable[..., Any], primals: Any, tangents: Any, argnums: Any,
                      *, strict: bool = False, has_aux: bool = False) -> tuple[Any, ...]:
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be valid "
                           f"to call f(*primals).")
    diff_args = primals if argnums is None else _slice_argnums(primals, argnums)
    flat_primals, primals_spec = tree_flatten(diff_args)
    flat_tangents, tangents_spec = tree_flatten(tangents)
    if primals_spec != tangents_spec:
        raise RuntimeError(f"{_JVP}: Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, "
                           f"tangents also must be. Got primals with structure {primals_spec} "
                           f"and tangents with structure {tangents_spec}")
    _non_empty_list_of_tensors(flat_primals, _JVP, "primals")
    _non_empty_list_of_tensors(flat_tangents, _JVP, "tangents")
    for p, t in zip(flat_primals, flat_tangents):
        if p.shape != t.shape:
            raise RuntimeError(f"Trying to set a forward gradient that has a different size "
                               f"than that of the original Tensor, this is not supported. "
                               f"Tensor is of size {list(p.shape)} while the given forward "
                               f"gradient is of size {list(t.shape)}.")
    with Level("grad", tree_leaves(primals)) as level, enable_grad():
        wrapped = [level.differentiable(p) for p in flat_primals]
        duals = tree_unflatten(wrapped, primals_spec)
        args = duals if argnums is None else _replace_args(
            primals, duals if isinstance(argnums, tuple) else duals[0], argnums)
        result = func(*args)
        aux = None
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(f"{_JVP}: output of function f should be a tuple: (output, "
                                   f"aux) if has_aux is True")
            result, aux = result
            aux = _unwrap_aux(level, aux)
        flat_out, out_spec = tree_flatten(result)
        _non_empty_tensor_output(flat_out, _JVP)
        differentiable = [i for i, o in enumerate(flat_out) if o.requires_grad]
        products: dict[int, Tensor] = {}
        if differentiable:
            dummies = [level.private(_zeros_like(flat_out[i]).requires_grad_(True))
                       for i in differentiable]
            back = _autograd_grad_raw([flat_out[i] for i in differentiable], wrapped, dummies,
                                      retain_graph=True, create_graph=True, allow_unused=True)
            pairs = [(b, t) for b, t in zip(back, flat_tangents)
                     if b is not None and b.requires_grad]
            if pairs:
                create = level.reaches_outer(flat_out) or any(
                    t.requires_grad for _, t in pairs)
                jv = _autograd_grad_raw([b for b, _ in pairs], dummies, [t for _, t in pairs],
                                        retain_graph=True, create_graph=create,
                                        allow_unused=True)
                products = {i: g for i, g in zip(differentiable, jv) if g is not None}
        tangents_out = []
        for i, o in enumerate(flat_out):
            if i not in products:
                if strict:
                    raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f "
                                       "is independent of the inputs. This is not allowed with "
                                       "strict=True.")
                tangents_out.append(_zeros_like(o))
            else:
                tangents_out.append(level.unwrap(products[i]))
        primals_out = tree_unflatten([level.unwrap(o) for o in flat_out], out_spec)
        tangents_out = tree_unflatten(tangents_out, out_spec)
    if has_aux:
        return primals_out, tangents_out, aux
    return primals_out, tangents_out


# ------------------------------------------------------------------ jacrev, jacfwd, hessian


def _jacobian(func: Callable[..., Any], args: tuple[Any, ...], argnums: Any, has_aux: bool,
              forward: bool, randomness: str | None = None) -> Any:
    """The Jacobian of ``func`` at ``args`` with respect to ``argnums``, by rows (reverse
    mode) or by columns (``forward``): per output, per primal, ``[*output.shape,
    *primal.shape]``, in ``jacrev``'s nesting (outputs outside, primals inside)."""
    from tinytrain.functions import stack  # noqa: PLC0415

    traced = _Traced(func, args, argnums, has_aux, randomness)
    if not forward:
        traced.check_float_outputs()
    primals = _slice_argnums(args, argnums)
    flat_primals, primals_spec = tree_flatten(primals)
    parts = traced.columns() if forward else traced.rows()
    blocks = []  # blocks[j][i]: output j, primal i
    for j, out in enumerate(traced.flat_out):
        row = []
        for i, p in enumerate(flat_primals):
            pieces = parts[i][j]
            if not pieces:  # an empty output or input
                row.append(p.detach().new_zeros((*out.shape, *p.shape)).to(dtype=out.dtype))
            elif forward:
                row.append(traced.level.unwrap(
                    stack(pieces, dim=-1).reshape(*out.shape, *p.shape)))
            else:
                row.append(stack(pieces).reshape(*out.shape, *p.shape))
        blocks.append(row)
    per_output = [tree_unflatten(row, primals_spec) for row in blocks]
    if isinstance(argnums, int):
        per_output = [jac[0] for jac in per_output]
    jac = tree_unflatten(per_output, traced.out_spec)
    return (jac, traced.aux) if has_aux else jac


def jacrev(func: Callable[..., Any], argnums: argnums_t = 0, *, has_aux: bool = False,
           chunk_size: int | None = None, _preallocate_and_copy: bool = False
           ) -> Callable[..., Any]:
    """``torch.func.jacrev``: a function that returns the Jacobian of ``func`` with respect to
    the argument(s) ``argnums``, in reverse mode: for each output (a pytree of them) and
    primal (a pytree, e.g. a dict of parameters), ``[*output.shape, *primal.shape]``; a tuple
    over the primals for a tuple ``argnums``. With ``has_aux``: ``(jacobian, aux)``.

    PyTorch runs ``vmap(vjp_fn)`` over the standard basis; tinytrain runs ``vjp_fn`` once per
    output element (one backward pass each, of the output that element belongs to), which is
    what ``chunk_size=1`` does in PyTorch. ``chunk_size`` is checked and changes nothing else.
    """
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @_wraps(func)
    def wrapper_fn(*args: Any) -> Any:
        return _jacobian(func, args, argnums, has_aux, forward=False)
    return wrapper_fn


def jacfwd(func: Callable[..., Any], argnums: argnums_t = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable[..., Any]:
    """``torch.func.jacfwd``: the Jacobian of ``func`` with respect to ``argnums``, with
    :func:`jacrev`'s layout and results, computed column by column (cost: one backward pass
    per *input* element, so it is the cheaper one for tall Jacobians, as in PyTorch).

    Differs from PyTorch in how, not what: PyTorch pushes one forward-mode JVP per input
    element through ``vmap``; tinytrain has no forward-mode AD, so each column is a JVP by
    the double-vjp trick (:func:`jvp`), the first backward shared by all columns: every op of
    ``func`` needs a double backward (tinytrain's have one; PyTorch's jacfwd likewise needs
    forward-mode formulas). ``func`` runs once. ``randomness`` is vmap's: with ``'error'``
    (the default) a random operation inside ``func`` raises, as in PyTorch; with ``'same'``
    or ``'different'`` it runs, and every column sees the same draws (PyTorch's ``'same'``)."""
    from tinytrain.func._vmap import check_randomness_arg  # noqa: PLC0415

    @_wraps(func)
    def wrapper_fn(*args: Any) -> Any:
        check_randomness_arg(randomness)
        return _jacobian(func, args, argnums, has_aux, forward=True, randomness=randomness)
    return wrapper_fn


def hessian(func: Callable[..., Any], argnums: argnums_t = 0) -> Callable[..., Any]:
    """``torch.func.hessian``: ``jacfwd(jacrev(func, argnums), argnums)``, the Jacobian of
    the Jacobian: for a function of ``x [N]`` with output ``[M]``, ``[M, N, N]``."""
    return jacfwd(jacrev(func, argnums), argnums)
