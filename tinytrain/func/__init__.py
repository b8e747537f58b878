"""``tt.func``: PyTorch's ``torch.func`` function transforms, with its signatures, results,
shapes and errors.

* :func:`functional_call` calls a module with other parameters and buffers;
  :func:`stack_module_state` stacks the states of ``M`` models for :func:`vmap`;
* :func:`grad`, :func:`grad_and_value` (``argnums`` an int or a tuple, ``has_aux``),
  :func:`vjp`, :func:`jvp`, :func:`jacrev`, :func:`jacfwd`, :func:`hessian`;
* :func:`vmap` (``in_dims``/``out_dims`` ints, ``None`` or nested pytrees, ``randomness``,
  ``chunk_size``).

They compose: ``grad(grad(f))``, ``vmap(grad(loss), in_dims=(None, 0, 0))`` (per-sample
gradients), ``jacrev(jacrev(f))``, ``vmap(jacrev(f))``, ``grad`` of a function that calls
``vmap``, and with ordinary autograd (a result that depends on a tensor that requires grad
outside keeps its graph).

DESIGN
------
**The autodiff transforms are tinytrain's reverse-mode engine, level by level.** PyTorch's
functorch wraps tensors per *level* and runs autograd at each. tinytrain has one tape, which
already does higher-order gradients (``create_graph=True``, every op's ``backward_graph``), so
a transform is: make the inputs it differentiates its own leaves (a detached copy that
requires grad, or a view of an input that already requires grad, so that an outer level sees
through it), run the function with grad mode on (a ``no_grad`` around ``grad`` is ignored, one
inside the function obeyed, as PyTorch's), and call ``autograd.grad``. ``create_graph`` is
used only when an outer level needs the graph: when the output's graph reaches a leaf that is
not this level's own nor one of a level that has ended (a user's tensor that requires grad, an
outer transform's leaf). That walk of the graph is also how results leave a level: detached
unless they depend on an outer one (PyTorch's unwrapping). ``grad(grad(f))``, ``jacrev(jacrev(f))``
and ``hessian`` are thus double (or deeper) backward passes through the same engine.

**No forward mode.** tinytrain has no dual numbers: :func:`jvp` computes ``J v`` by the
double-vjp trick (the gradient with respect to a dummy ``u`` of ``(u^T J) v``: the function
needs a double backward, as PyTorch's jvp needs forward-mode formulas), and :func:`jacfwd`
computes the Jacobian column by column the same way, the first backward shared, so its cost
grows with the number of *inputs* and :func:`jacrev`'s (one backward per output element)
with the number of outputs, as in PyTorch: ``hessian = jacfwd(jacrev(f))`` is the cheap one
(``jacrev(jacrev(f))`` backpropagates each element of the inner Jacobian through every row's
graph). Results and layouts are PyTorch's.

**vmap runs the function once per sample and stacks the results.** tinytrain has no batched
tensors or batching rules. :func:`vmap` gives ``torch.func.vmap``'s *semantics* (values,
shapes, ``in_dims``/``out_dims``, randomness, the errors for bad dims and mismatched batch
sizes, composition with every other transform in both orders), not its speed: the cost is a
Python loop over the batch. Each sample sees views of the mapped inputs (``select``), so
in-place writes to them reach the inputs, as PyTorch's do, and gradients flow back through
the stacking. ``randomness='same'`` restores the global random stream before each sample;
``'error'`` makes any random draw raise (the random functions ask ``tinytrain._func_state``).
``jacrev`` likewise runs its vector-Jacobian products one after the other.

What the loop detects, as PyTorch raises: mismatched batch sizes, bad ``in_dims``/``out_dims``
(types, ranges, structures), non-Tensor outputs, random draws under ``randomness='error'``, an
output returned with ``out_dims=None`` that differs between samples, and **in-place writes to
a tensor the function captured** (inside ``grad``/``vjp``/``jvp``: PyTorch's "would mutate a
captured Tensor" error; inside ``vmap``: the loop would write it once per sample). For that,
``Tensor.__init__`` tells the innermost running transform about each new array, and every
in-place write asks whether its memory was born inside, or was given to the transform.

The hot paths pay one test of an empty list each (``Tensor.__init__``, in-place writes,
random draws) outside every transform.

What the loop does **not** detect (PyTorch raises; tinytrain runs it, each sample on its own
values): ``.item()``, ``bool()``, ``if x > 0:`` and other data-dependent control flow on a
per-sample value; an in-place write of a per-sample value into a tensor made inside the
function without the batch dimension (PyTorch: "inplace arithmetic ... not possible"; here
each sample writes its own copy); operations whose output shape depends on the data (here
the shapes must agree across samples, else RuntimeError). With ``out_dims=None`` an output
equal in every sample is taken as unmapped even where PyTorch would call it batched (``0 *
x``). A batch of size 0 runs the function once on zeros of a sample's shapes, for the
outputs' shapes. An unmapped output with a nonzero ``out_dim`` comes back expanded along it
(PyTorch 2.13 fails there: a tensor of garbage sizes, or an error). With
``randomness='different'`` each sample draws in turn (sample 0's draws, then sample 1's...),
where PyTorch draws each random op for the whole batch at once: the distributions are the
same, the numbers' order is not (tinytrain's generator differs from PyTorch's anyway). A
``generator=`` given to a random function is not restored by ``randomness='same'``.
"""

from tinytrain.func._grad import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from tinytrain.func._module import functional_call, stack_module_state
from tinytrain.func._vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "stack_module_state", "vjp", "vmap"]
