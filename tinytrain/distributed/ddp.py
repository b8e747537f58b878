"""``DistributedDataParallel``: average the gradients of every rank during backward.

Each rank runs the same model on its own shard of the batch. If every rank starts from the
same weights and applies the same averaged gradient, the weights stay identical, and the
run computes what one process would on the whole batch. The wrapper does three things:

1. **Broadcast before wrap**: rank 0's parameters and buffers are copied to every rank
   (the buffers again before each forward that follows a training one, as in PyTorch).
2. **Buckets**: gradients are grouped, in *reverse* registration order (roughly the order
   in which backward produces them), into a few flat buffers: the first one small
   (``first_bucket_cap_mb``) so that communication starts early, the others up to
   ``bucket_cap_mb``. Each parameter's ``.grad`` is a *view* into its bucket, bound before
   backward, so that the gradients land in the buffer with no copy.
3. **Overlap**: a post-accumulate-grad hook on every parameter counts the gradients that are
   ready; when a bucket is full, its all-reduce (``"avg"``) starts at once, asynchronously,
   while backward computes the rest. Buckets start in index order (the same order on every
   rank, which collectives require). A callback at the end of backward
   (:func:`tinytrain.autograd.queue_callback`) waits for all of them.

What must not go silently wrong, and the error it gets instead:

* ``zero_grad(set_to_none=True)`` *after* forward (InfiniTrain's bug) drops the binding:
  backward then makes a fresh ``.grad`` that is not in any bucket, is never averaged, and
  the ranks drift apart. The hook sees the fresh ``.grad`` and raises.
* A parameter that got no gradient leaves its bucket incomplete: without
  ``find_unused_parameters=True`` the end of backward raises and names it (never a hang).
* Ranks built different models: the wrapper compares names and shapes first.
* Anything else that makes ranks diverge: ``check_consistency()`` compares a digest of
  every parameter across ranks; ``check_every=K`` runs it every K steps.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinytrain.autograd import is_grad_enabled, queue_callback
from tinytrain.backend import cupy_module, device_of, get_array_module, to_device
from tinytrain.distributed.process_group import CollectiveError
from tinytrain.nn.module import Module
from tinytrain.tensor import Tensor

MB = 1024 * 1024

#: The model -> the wrapper whose forward recorded a graph last. Its hooks alone act on the
#: model's gradients, as in PyTorch: wrapping a model again (a notebook cell run twice, a
#: wrapper wrapped) leaves the older wrapper's hooks on the parameters, idle.
_ACTIVE: weakref.WeakKeyDictionary[Module, weakref.ref] = weakref.WeakKeyDictionary()


def assign_buckets(nbytes: Sequence[int], first_cap: int, cap: int,
                   keys: Sequence[Any] | None = None) -> list[list[int]]:
    """Group parameters into buckets: lists of parameter indices.

    Parameters are taken in reverse order (``len - 1`` down to ``0``). A bucket is closed
    once it holds at least its cap in bytes (``first_cap`` for the first bucket, ``cap`` for
    the others), so it may end above the cap by its last parameter, and a parameter larger
    than the cap gets a bucket of its own. Parameters with different ``keys`` (dtypes) never
    share a bucket. The size rule is PyTorch's (``_compute_bucket_assignment_by_size``), but
    PyTorch's first layout takes the parameters in definition order and rebuilds it after
    the first step in the order the gradients arrived; tinytrain starts from reverse
    definition order, which is about that rebuilt layout for a feed-forward model. The
    buckets differ, the averaged gradients do not.
    """
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in reversed(range(len(nbytes))):
        if current and keys is not None and keys[i] != keys[current[-1]]:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += nbytes[i]
        if size >= (cap if buckets else first_cap):
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


@dataclass
class Bucket:
    """One flat gradient buffer and the parameters whose ``.grad`` are views into it."""

    index: int
    names: list[str]
    params: list[Tensor]
    buffer: Any                       # 1-d array of the device's module
    views: list[Any]                  # each parameter's part of buffer, in its shape
    grads: list[Tensor]               # the .grad bound to each parameter (wrapping its view)
    ready: list[bool] = field(default_factory=list)
    work: Any = None                  # the all-reduce in flight
    fresh: list[bool] = field(default_factory=list)  # .grad was None when bound, and no
    #                                                  gradient has arrived since
    used: list[bool] = field(default_factory=list)   # got a gradient on this rank since the
    #                                                  last averaging backward (no_sync too)

    @property
    def nbytes(self) -> int:
        return int(self.buffer.nbytes)

    def is_bound(self, slot: int) -> bool:
        grad = self.params[slot].grad
        return grad is self.grads[slot] and grad._data is self.views[slot]


class DistributedDataParallel(Module):
    """Wrap ``module`` so that backward averages its gradients over all ranks.

    Args:
        module: the model, already on the group's device (``"cpu"`` for mpi, ``"cuda"`` for
            nccl), identical in structure on every rank.
        device_ids, output_device: PyTorch's, accepted so its scripts port: None for a
            model on the CPU; on GPUs ``[local_rank]`` (or None), the GPU this rank already
            uses. Anything else is an error, not ignored.
        bucket_cap_mb: size cap of the buckets after the first (MiB); None: 25, as PyTorch.
        find_unused_parameters: allow parameters that get no gradient in a step;
            otherwise they are an error. As in PyTorch, a parameter that got a gradient on
            some rank gets the average (counting the others' as zero), and one that got
            none on any rank keeps the ``.grad`` it had before the step (``None`` after
            ``zero_grad()``, so the optimizer skips it); one more small all-reduce per
            step (of which parameters each rank used) finds out which.
        check_every: run :meth:`check_consistency` every this many training forwards (0:
            never).
        first_bucket_cap_mb: size cap of the first bucket (tinytrain-only; PyTorch fixes it
            at 1 MiB).
        forward_sync_buffers: copy rank 0's buffers (BatchNorm's running statistics) to
            every rank before a forward, as PyTorch does: before the first forward and
            before any forward that follows a training forward (one with autograd on,
            outside :meth:`no_sync`), so all ranks evaluate with rank 0's statistics and
            each training step starts from them. ``False``: each rank's statistics follow
            its own data (they are still copied once, when the model is wrapped). Default
            True.
        broadcast_buffers: PyTorch's older name (deprecated there in 2.13), with its
            meaning: ``False`` also leaves the buffers out of the copy at wrap (rank-local
            buffers); ignored when ``forward_sync_buffers`` is given. The attribute
            ``ddp.broadcast_buffers`` reads and sets ``forward_sync_buffers``.
        gradient_as_bucket_view, static_graph: PyTorch's, accepted so its scripts port, and
            without effect: tinytrain's ``.grad`` are always views into the buckets, and the
            graph is not analysed.

    Every rank must call the wrapper's forward the same number of times (the buffers'
    broadcast is a collective); evaluate on one rank with ``ddp.module``.

    Differs from PyTorch: from a forward that records a graph until its backward, every
    ``.grad`` is already its bucket's view (zeros where no gradient has arrived yet, also
    inside ``no_sync``); PyTorch's stay None until their gradient arrives. After an
    averaging backward they agree again.

    Call it like the module (``ddp(x)``); the step is the usual ``zero_grad -> forward ->
    loss -> backward -> step``. ``ddp.module`` is the wrapped model: save its
    ``state_dict()`` (the wrapper's own has PyTorch's ``module.`` prefix).
    """

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, bucket_cap_mb: float | None = None,
                 find_unused_parameters: bool = False, check_every: int = 0,
                 first_bucket_cap_mb: float = 1.0, broadcast_buffers: bool | None = None,
                 forward_sync_buffers: bool | None = None,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False) -> None:
        from tinytrain import distributed as dist

        super().__init__()
        self.module = module
        self.group = dist.group("DistributedDataParallel")
        self._check_device_ids(device_ids, output_device)
        self.find_unused_parameters = find_unused_parameters
        self.check_every = int(check_every)
        self.require_backward_grad_sync = True  # False inside no_sync()
        if forward_sync_buffers is not None:  # PyTorch 2.13's rule for the two flags
            self.forward_sync_buffers, buffers_at_wrap = bool(forward_sync_buffers), True
        else:
            self.forward_sync_buffers = buffers_at_wrap = broadcast_buffers in (None, True)
        self.require_forward_param_sync = True  # PyTorch's: the last forward was a training one
        self.measure_comm_wait = False           # bench/ddp.py: time blocked in wait()
        self._steps = 0
        self._sync_this_backward = True
        self._forward_ran = False  # a forward that records a graph, since the last backward
        self._in_backward = False
        self._next_bucket = 0
        self._mask_work: Any = None  # find_unused_parameters: which parameters any rank used
        self._timers: list[Any] = []
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:  # PyTorch's words; nothing would be averaged
            raise RuntimeError(f"{self._where()}: DistributedDataParallel is not needed when "
                               "a module doesn't have any parameter that requires a gradient.")
        self._check_devices(named)
        self._check_same_model_on_all_ranks()
        self._broadcast_from_rank0(buffers_at_wrap)
        self._buffers_in_sync = buffers_at_wrap  # check_consistency compares them while True
        self.buckets = self._make_buckets(named, int(first_bucket_cap_mb * MB),
                                          int((25.0 if bucket_cap_mb is None else
                                               bucket_cap_mb) * MB))
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook(b, slot))
                       for b in self.buckets for slot, p in enumerate(b.params)]

    # ------------------------------------------------------------ wrapping

    def _where(self) -> str:
        return f"DistributedDataParallel (rank {self.group.rank} of {self.group.world_size})"

    def __deepcopy__(self, memo: dict) -> Any:
        raise TypeError(
            f"{self._where()}: the wrapper holds the process group and the gradient buckets, "
            "which are not copied: copy the model inside it, copy.deepcopy(ddp.module) (an "
            "EMA or best-model snapshot), and wrap the copy if it is to train")

    def __getstate__(self) -> Any:
        raise TypeError(f"{self._where()}: the wrapper cannot be pickled; pickle or save "
                        "ddp.module (its state_dict()) instead")

    def _check_device_ids(self, device_ids: Sequence[Any] | None, output_device: Any) -> None:
        """PyTorch's ``device_ids=[local_rank]``: only the GPU this rank already uses."""
        given = [] if device_ids is None else list(device_ids)
        if output_device is not None:
            given.append(output_device)
        if not given:
            return
        if self.group.device == "cpu":
            raise ValueError(
                f"{self._where()}: device_ids={device_ids!r}, output_device={output_device!r} "
                "are for a model on a GPU; with the mpi backend the model is on the CPU: pass "
                "neither")
        if device_ids is not None and len(device_ids) != 1:
            raise ValueError(f"{self._where()}: device_ids={device_ids!r}: one GPU per process, "
                             "device_ids=[local_rank] (or None)")
        mine = cupy_module().cuda.Device().id
        for d in given:
            index = d if isinstance(d, int) else str(d).partition(":")[2] or mine
            if int(index) != mine:
                raise ValueError(
                    f"{self._where()}: device {d!r} is not this rank's GPU ({mine}): tinytrain "
                    "gives each rank the GPU of its local rank; pass device_ids=[local_rank] "
                    "or None")

    def _check_devices(self, named: list[tuple[str, Tensor]]) -> None:
        for name, p in named:
            if p.device != self.group.device:
                raise RuntimeError(
                    f"{self._where()}: parameter {name} is on {p.device}, but the "
                    f"{self.group.backend} backend communicates {self.group.device} tensors; "
                    f"call model.to({self.group.device!r}) before wrapping it")

    def _check_same_model_on_all_ranks(self) -> None:
        """Different models would make the collectives below mismatch: hang or corrupt."""
        mine = [(n, t.shape, str(t.dtype), "trained" if t.requires_grad else "frozen")
                for n, t in self._state()]  # a parameter frozen on one rank only: buckets differ
        for rank, theirs in enumerate(self.group.allgather_object(
                mine, what="DistributedDataParallel: comparing the ranks' models when wrapping")):
            if theirs != mine:
                diff = next((f"{a} on rank {rank} but {b} here" for a, b in zip(theirs, mine)
                             if a != b), f"{len(theirs)} tensors on rank {rank} but {len(mine)} "
                                         "here")
                raise RuntimeError(f"{self._where()}: the ranks built different models: {diff}")

    def _state(self) -> list[tuple[str, Tensor]]:
        return list(self.module.named_parameters()) + list(self.module.named_buffers())

    @property
    def broadcast_buffers(self) -> bool:
        """PyTorch's alias of :attr:`forward_sync_buffers`."""
        return self.forward_sync_buffers

    @broadcast_buffers.setter
    def broadcast_buffers(self, value: bool) -> None:
        self.forward_sync_buffers = bool(value)

    def _broadcast_from_rank0(self, buffers: bool) -> None:
        state = self._state() if buffers else list(self.module.named_parameters())
        works = [self.group.broadcast(t._data, 0) for _, t in state]
        for w in works:
            w.wait()

    def _broadcast_buffers(self) -> None:
        """Rank 0's buffers to every rank, in place (looked up each time: a module may have
        replaced one)."""
        buffers = [t for _, t in self.module.named_buffers()]
        if not buffers:
            return
        self._check_group_alive()
        works = [self.group.broadcast(t._data, 0) for t in buffers]
        for w in works:
            w.wait()
        self._buffers_in_sync = True

    def _make_buckets(self, named: list[tuple[str, Tensor]], first_cap: int,
                      cap: int) -> list[Bucket]:
        params = [p for _, p in named]
        layout = assign_buckets([p._data.nbytes for p in params], first_cap, cap,
                                keys=[p.dtype for p in params])
        buckets = []
        for index, members in enumerate(layout):
            ps = [params[i] for i in members]
            xp = get_array_module(ps[0]._data)
            buffer = xp.zeros(sum(p.numel() for p in ps), dtype=ps[0].dtype)
            views, offset = [], 0
            for p in ps:
                views.append(buffer[offset:offset + p.numel()].reshape(p.shape))
                offset += p.numel()
            bucket = Bucket(index, [named[i][0] for i in members], ps, buffer, views,
                            [Tensor(v) for v in views], [False] * len(ps),
                            fresh=[False] * len(ps), used=[False] * len(ps))
            buckets.append(bucket)
        return buckets  # bound by the first forward: until then .grad stays as it was

    # ------------------------------------------------------------ forward

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.forward_sync_buffers and self.require_forward_param_sync:
            self._broadcast_buffers()  # a model without buffers: nothing to do
        training = is_grad_enabled() and self.require_backward_grad_sync
        self.require_forward_param_sync = training
        # Any forward that records a graph prepares the buckets, in eval mode too (training
        # with dropout off is still training; PyTorch syncs then as well).
        if is_grad_enabled():
            self._check_group_alive()
            if self._in_backward:  # the last backward failed half-way
                self._abandon_backward()
            if self.check_every and (self._steps + 1) % self.check_every == 0:
                self.check_consistency()  # (before this step: after self._steps of them)
            self._steps += 1
            _ACTIVE[self._model()] = weakref.ref(self)
            for b in self.buckets:
                self._bind(b, self._where())
            self._sync_this_backward = self.require_backward_grad_sync
            self._forward_ran = True
        self._buffers_in_sync = False  # the module may update them from this rank's batch
        return self.module(*args, **kwargs)

    def _check_group_alive(self) -> None:
        from tinytrain import distributed as dist

        if not dist.is_initialized() or dist.group() is not self.group:
            raise RuntimeError(f"{self._where()}: the process group was destroyed "
                               "(destroy_process_group()); the wrapper cannot average "
                               "gradients any more: train ddp.module alone, or wrap again "
                               "after init_process_group()")

    @staticmethod
    def _bind(b: Bucket, where: str) -> None:
        """Make every ``.grad`` of the bucket its view again. ``zero_grad(set_to_none=True)``
        before forward unbinds them: that is the normal step, and costs one fill of the
        bucket with zeros (one kernel on a GPU, not one per parameter)."""
        unbound = [slot for slot in range(len(b.params)) if not b.is_bound(slot)]
        if not unbound:
            return
        for slot in unbound:
            p, view = b.params[slot], b.views[slot]
            if p.dtype != view.dtype or p.device != device_of(view):  # .to() after wrapping
                raise RuntimeError(
                    f"{where}: parameter {b.names[slot]} is {p.dtype} on {p.device}, but its "
                    f"gradient bucket was made {view.dtype} on {device_of(view)} when the "
                    f"model was wrapped: move or cast the model before wrapping it")
            b.fresh[slot] = p.grad is None
        if len(unbound) == len(b.params) and all(p.grad is None for p in b.params):
            b.buffer.fill(0)
        else:
            for slot in unbound:
                p = b.params[slot]
                if p.grad is None:
                    b.views[slot][...] = 0
                else:  # a gradient the user assigned: keep its values
                    b.views[slot][...] = p.grad._data
        for slot in unbound:
            b.grads[slot].data = b.views[slot]
            b.params[slot].grad = b.grads[slot]

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Forward and backward inside accumulate gradients locally, without communication;
        the first backward after it averages the accumulated sum (gradient accumulation)."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    # ------------------------------------------------------------ backward

    def _hook(self, bucket: Bucket, slot: int) -> Any:
        def grad_ready(param: Tensor) -> None:
            self._grad_ready(bucket, slot)
        return grad_ready

    def _model(self) -> Module:
        """The model under this wrapper (under all of them, if it wraps a wrapper)."""
        model = self.module
        while isinstance(model, DistributedDataParallel):
            model = model.module
        return model

    def _grad_ready(self, b: Bucket, slot: int) -> None:
        active = _ACTIVE.get(self._model())
        if active is not None and active() is not self:  # another wrapper's forward ran last
            return
        b.fresh[slot] = False  # it holds a gradient now (also one accumulated in no_sync)
        b.used[slot] = True
        if not self._sync_this_backward:
            return
        if not b.is_bound(slot):
            self._abandon_backward()
            if not self._forward_ran:
                raise RuntimeError(
                    f"{self._where()}: the gradient of {b.names[slot]} is not in its bucket: "
                    "this backward follows no forward of the DDP wrapper since the last "
                    "backward, so either the model was called directly (ddp.module(x) or "
                    "model.forward(x) instead of ddp(x)), or a graph kept with "
                    "retain_graph=True is run backward again after zero_grad(set_to_none="
                    "True) unbound the gradients. Its gradients would never be averaged and "
                    "the ranks would silently diverge: call the wrapper, ddp(x), before each "
                    "backward.")
            raise RuntimeError(
                f"{self._where()}: the gradient of {b.names[slot]} is not in its bucket: its "
                ".grad was replaced after forward, typically by zero_grad(set_to_none=True) "
                "between forward and backward. This gradient would never be averaged and the "
                "ranks would silently diverge. Call zero_grad() before the forward pass.")
        if not self._in_backward:
            self._in_backward = True
            queue_callback(self._finish_backward)
        b.ready[slot] = True
        self._launch_ready_buckets()

    def _launch_ready_buckets(self) -> None:
        """Start the all-reduce of every full bucket, in bucket order (same on all ranks)."""
        while self._next_bucket < len(self.buckets) and all(self.buckets[self._next_bucket].ready):
            b = self.buckets[self._next_bucket]
            b.work = self.group.all_reduce(b.buffer, "avg")
            self._next_bucket += 1

    def _finish_backward(self) -> None:
        """End of backward: every bucket must have been started; wait for all of them."""
        try:
            unused = [n for b in self.buckets[self._next_bucket:]
                      for n, r in zip(b.names, b.ready) if not r]
            if unused and not self.find_unused_parameters:
                raise RuntimeError(
                    f"{self._where()}: these parameters received no gradient in this step: "
                    f"{', '.join(unused)}. Every parameter's gradient is averaged across ranks, "
                    "so DDP must know when they are all ready: make every parameter take part "
                    "in the loss, or pass find_unused_parameters=True (a gradient another "
                    "rank has is then averaged with zeros, and one no rank has stays unset), "
                    "or set requires_grad=False on those you do not train before wrapping the "
                    "model (the buckets are made then).")
            flags = [float(u) for b in self.buckets for u in b.used]  # since the last sync
            for b in self.buckets[self._next_bucket:]:
                b.ready = [True] * len(b.params)
            self._launch_ready_buckets()
            if self.find_unused_parameters:  # after the buckets', in the same order everywhere
                mask = to_device(np.array(flags, dtype=np.float32), self.group.device)
                self._mask_work = self.group.all_reduce(mask, "sum")  # > 0: used somewhere
            timer = self.group.stall_timer() if self.measure_comm_wait else None
            if timer:
                timer.start()
            for b in self.buckets:
                b.work.wait()
            if timer:
                timer.stop()
                self._timers.append(timer)
            replaced = [n for b in self.buckets for slot, n in enumerate(b.names)
                        if not b.is_bound(slot)]
            if replaced:
                raise RuntimeError(f"{self._where()}: .grad of {', '.join(replaced)} was "
                                   "replaced during backward; it was not averaged across ranks")
            if self.find_unused_parameters:
                self._unset_unused_grads(mask)
        except CollectiveError as exc:  # another rank is gone: waiting again would take
            self._abandon_backward(wait=False)  # another full timeout
            raise type(exc)(f"{self._where()}, averaging the gradients at the end of "
                            f"backward: {exc}") from None
        finally:
            self._abandon_backward()
            self._forward_ran = False

    def _unset_unused_grads(self, mask: Any) -> None:
        """``mask``: > 0 for each parameter (in bucket order) that some rank used since the last
        averaging backward (``no_sync`` micro-batches count, as in PyTorch). Those no rank
        used keep the ``.grad`` they had before: ``None`` where the bucket's view was bound in
        place of a ``None`` (PyTorch leaves those unset). Those some rank used now hold the
        average on every rank, also where this rank had none."""
        self._mask_work.wait()
        on_any_rank = iter(to_device(mask, "cpu") > 0)
        for b in self.buckets:
            for slot, p in enumerate(b.params):
                if next(on_any_rank):
                    b.fresh[slot] = False
                elif b.fresh[slot]:
                    p.grad = None

    def _abandon_backward(self, wait: bool = True) -> None:
        """Wait for what was started (so no collective dangles) and reset the step's state
        (also the parameters used since the last averaging backward)."""
        if self._mask_work is not None and wait:
            self._mask_work.wait()
        self._mask_work = None
        for b in self.buckets:
            if b.work is not None and wait:
                b.work.wait()
            b.work, b.ready, b.used = None, [False] * len(b.params), [False] * len(b.params)
        self._next_bucket = 0
        self._in_backward = False

    def comm_wait_seconds(self) -> float:
        """Total time blocked waiting for the all-reduces at the end of backward since the
        last call (needs ``measure_comm_wait = True``; on a GPU, the stream's wait)."""
        total = sum(t.seconds() for t in self._timers)
        self._timers = []
        return total

    # ------------------------------------------------------------ consistency

    def check_consistency(self) -> None:
        """Raise if any parameter differs, in any bit, between ranks; the buffers too while
        they should be equal: from the wrapper's copy of rank 0's (at wrap, or before a
        forward) until a forward runs (BatchNorm updates them from each rank's batch).

        Every rank hashes each tensor (on the host) and the digests are gathered: one small
        collective, but a copy of the model to the host, so use it every few hundred steps.
        """
        state = (self._state() if self._buffers_in_sync
                 else list(self.module.named_parameters()))
        names = [n for n, _ in state]
        mine = [hashlib.blake2b(np.ascontiguousarray(t.numpy()).tobytes(), digest_size=8)
                .hexdigest() for _, t in state]
        everyone = self.group.allgather_object(mine, what="DistributedDataParallel: "
                                               "check_consistency")
        differ = [n for i, n in enumerate(names) if len({d[i] for d in everyone}) > 1]
        if differ:
            raise RuntimeError(
                f"{self._where()}: after {self._steps} training steps the ranks hold different "
                f"values of {', '.join(differ)}. Something other than the averaged gradients "
                "changed them: an update outside the optimizer, a rank-dependent "
                "initialisation, or a .grad unbound from its bucket.")

    def extra_repr(self) -> str:
        sizes = ", ".join(f"{b.nbytes / MB:.2f}" for b in self.buckets)
        return f"world_size={self.group.world_size}, buckets (MiB)=[{sizes}]"
