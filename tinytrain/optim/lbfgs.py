"""L-BFGS (Nocedal, 1980; Liu & Nocedal, 1989), as PyTorch's ``torch.optim.LBFGS`` computes it:
a quasi-Newton method that re-evaluates the loss through a closure.

The parameters are treated as one flat vector ``x`` of ``n`` numbers (every parameter's
elements, in order); its gradient ``g`` and the search direction ``d`` are flat vectors ``[n]``
of the parameters' array module (NumPy or CuPy). The scalars (``t``, ``g . d``, the history's
``1 / (y . s)``) are 0-d values of that module, as PyTorch keeps them as 0-d tensors, so that a
float32 run computes in float32 as PyTorch's does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from tinytrain.autograd import enable_grad, no_grad
from tinytrain.backend import get_array_module
from tinytrain.optim.optimizer import Optimizer
from tinytrain.tensor import Tensor

#: f(x + t d) and its flat gradient [n], for a step ``t`` along a direction ``d`` [n]
Objective = Callable[[Any, Any], tuple[float, Any]]


def _cubic_interpolate(x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any,
                       bounds: tuple[Any, Any] | None = None) -> Any:
    """The minimiser of the cubic through two points ``x1``, ``x2`` (scalars: steps along the
    line) with their values ``f1``, ``f2`` and slopes ``g1``, ``g2``, clamped to ``bounds``
    (default: the interval between the points); the interval's middle where the cubic has no
    minimum. Ported from PyTorch (after torch/optim's ``polyinterp.lua``)::

        d1 = g1 + g2 - 3 (f1 - f2) / (x1 - x2)
        d2 = sqrt(d1^2 - g1 g2)
        min_pos = x2 - (x2 - x1) (g2 + d2 - d1) / (g2 - g1 + 2 d2)      (x1 <= x2)
    """
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (xmin_bound + xmax_bound) / 2.0
    d2 = get_array_module(d2_square).sqrt(d2_square)
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, xmin_bound), xmax_bound)


def _strong_wolfe(obj_func: Objective, t: Any, d: Any, f: float, g: Any, gtd: Any,
                  c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                  max_ls: int = 25) -> tuple[float, Any, Any, int]:
    """A step ``t`` along the direction ``d`` [n] that satisfies the strong Wolfe conditions::

        f(x + t d) <= f + c1 t gtd               (sufficient decrease)
        |g(x + t d) . d| <= -c2 gtd              (curvature)

    from the loss ``f``, flat gradient ``g`` [n] and slope ``gtd = g . d`` at ``t = 0``, with at
    most ``max_ls`` evaluations of ``obj_func(t, d)``. First it brackets an interval that holds
    such a step (growing ``t`` by cubic interpolation, at most 10x a time), then it shrinks the
    bracket by cubic interpolation ("zoom"). Ported from PyTorch (after torch/optim's
    ``lswolfe.lua``). Returns ``(f_new, g_new [n], t, evaluations)``.
    """
    xp = get_array_module(d)
    d_norm = xp.abs(d).max()
    f_new, g_new = obj_func(t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)

    # bracketing: [t_prev, t] with values, gradients and slopes at both ends
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:  # t itself satisfies both conditions
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:  # the slope turned: the minimum lies in [t_prev, t]
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # still descending: extrapolate to a longer step
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        t_prev, t = t, _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                          bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = obj_func(t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1

    if ls_iter == max_ls:  # out of evaluations while extrapolating
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket around a point that satisfies the conditions
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:  # the bracket is tiny
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])

        # a trial within 10% of the bracket's ends makes little progress: the second time
        # (or when it is at an end) move it to 10% of the bracket from the nearer end
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False

        f_new, g_new = obj_func(t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # no sufficient decrease, or not below the low end: t becomes the high end
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new, gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:  # the Wolfe conditions hold
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # the old low end becomes the high end
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            # t becomes the low end
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new, gtd_new

    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


def _two_loop(flat_grad: Any, old_dirs: list[Any], old_stps: list[Any], ro: list[Any],
              H_diag: Any, al: list[Any]) -> Any:
    """``-H g`` [n], the L-BFGS direction, by the two-loop recursion over the history (oldest
    first): the gradient differences ``y`` [n] (``old_dirs``), the steps ``s`` [n]
    (``old_stps``) and ``ro = 1 / (y . s)``; ``H_diag`` scales the initial inverse Hessian.
    ``al`` receives the first loop's coefficients (PyTorch keeps them in the state)."""
    q = -flat_grad
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = old_stps[i].dot(q) * ro[i]
        q -= al[i] * old_dirs[i]
    r = q * H_diag
    for i in range(len(old_dirs)):
        be_i = old_dirs[i].dot(r) * ro[i]
        r += (al[i] - be_i) * old_stps[i]
    return r


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's options and numbers. Each ``step(closure)`` runs up to
    ``max_iter`` iterations (and ``max_eval`` calls of ``closure``, which must zero the
    gradients, compute the loss, call ``backward()`` and return the loss)::

        g = flat gradient [n] at x
        d = -H g        H: the inverse Hessian estimated from the last history_size pairs
                        (s = t d, y = g_new - g_old, kept while y . s > 1e-10) by the
                        two-loop recursion, scaled by (y . s) / (y . y) of the latest pair
        t = lr          (the very first iteration: min(1, 1 / sum|g|) * lr)
        t = the strong-Wolfe step from t    (line_search_fn="strong_wolfe")
        x = x + t d

    and stops early when ``max|g| <= tolerance_grad``, when ``g . d > -tolerance_change``,
    or when the step or the loss changes by less than ``tolerance_change``. The history
    carries over between ``step`` calls. As in PyTorch, there is one parameter group only;
    the state (the history, ``d``, ``t``, counters) is kept as the first parameter's.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1,
                 max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """The one group of parameters; a second is refused (PyTorch's error)."""
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _state_shape(self, p: Tensor) -> tuple[int, ...]:
        """The state's vectors are flat over all the parameters: ``[n]``."""
        return (sum(q.numel() for q in self._params()),)

    # -- the parameters as one flat vector [n] --------------------------------------------

    def _gather_flat_grad(self) -> Any:
        """Every parameter's gradient, flattened and concatenated (a new array) [n]; zeros
        for a parameter without a gradient."""
        params = self._params()
        xp = get_array_module(params[0]._data)
        return xp.concatenate([xp.zeros(p.numel(), p.dtype) if p.grad is None
                               else self._grad(p).reshape(-1) for p in params])

    def _add_grad(self, t: Any, d: Any) -> None:
        """``x = x + t * d``: each parameter moves by its slice of ``d`` [n], in place."""
        offset = 0
        for p in self._params():
            p._data += (t * d[offset:offset + p.numel()]).reshape(p.shape).astype(p.dtype,
                                                                                  copy=False)
            p._version_counter[0] += 1  # written in place: a graph that saved p must see it
            offset += p.numel()

    def _clone_param(self) -> list[Any]:
        return [p._data.copy() for p in self._params()]

    def _set_param(self, arrays: list[Any]) -> None:
        for p, data in zip(self._params(), arrays, strict=True):
            p._data[...] = data
            p._version_counter[0] += 1

    def _evaluate(self, closure: Callable[[], Any]) -> float:
        """The loss at the current parameters, with their gradients (the closure runs with
        gradients on; the float is taken outside, as PyTorch's, so that it does not warn)."""
        with enable_grad():
            loss = closure()
        return float(loss)

    def _directional_evaluate(self, closure: Callable[[], Any], x: list[Any], t: Any,
                              d: Any) -> tuple[float, Any]:
        """The loss and the flat gradient [n] at ``x + t d`` (``x``: the parameters' arrays,
        which are put back afterwards)."""
        self._add_grad(t, d)
        loss = self._evaluate(closure)
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @no_grad()
    def step(self, closure: Callable[[], Any]) -> Any:
        """Up to ``max_iter`` L-BFGS iterations; returns the closure's first loss (before
        them), as PyTorch's."""
        if not callable(closure):
            raise TypeError("LBFGS.step(closure): the closure must be a function that "
                            "re-evaluates the loss (zero_grad, forward, backward, return the "
                            f"loss), got {type(closure).__name__}")
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        params = self._params()
        xp = get_array_module(params[0]._data)

        state = self.state[params[0]]  # (the one state, kept as the first parameter's)
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._gather_flat_grad()
        if xp.abs(flat_grad).max() <= tolerance_grad:  # already optimal
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the direction d [n]
            if state["n_iter"] == 1:  # steepest descent
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:  # a pair of positive curvature enters the history
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)  # the initial inverse Hessian, a multiple of I
                if "al" not in state:
                    state["al"] = [None] * history_size
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, H_diag, state["al"])
            prev_flat_grad = flat_grad
            prev_loss = loss

            # the step length t
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / xp.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)  # the slope along d
            if gtd > -tolerance_change:  # not a descent direction (any more)
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                obj_func = functools.partial(self._directional_evaluate, closure,
                                             self._clone_param())
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = xp.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)  # a fixed step
                opt_cond = False
                if n_iter != max_iter:  # (the last iteration's loss is not needed)
                    loss = self._evaluate(closure)
                    flat_grad = self._gather_flat_grad()
                    opt_cond = xp.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if xp.abs(d * t).max() <= tolerance_change:  # the step is tiny
                break
            if abs(loss - prev_loss) < tolerance_change:  # the loss stopped changing
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
