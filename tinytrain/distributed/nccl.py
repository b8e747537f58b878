"""The ``nccl`` backend: CuPy arrays, one GPU per rank, collectives through NCCL.

Start-up (the *rendezvous*) reuses MPI: rank 0 asks NCCL for a unique id, MPI broadcasts it,
and every rank joins the communicator with it (``cupy.cuda.nccl.NcclCommunicator``, used
raw: ``cupyx.distributed`` hung for ~60 s at exit on the H200 machines, the raw communicator
did not). Each rank takes the GPU of its *local* rank, its index among the processes on its
machine.

**Streams.** The training step's kernels run on the current CUDA stream. Collectives run on
a side stream, so that communication overlaps the rest of backward:

1. ``all_reduce`` records an event on the current stream and makes the side stream wait
   for it: NCCL reads the gradients only once the kernels that wrote them have run;
2. NCCL's all-reduce (then, for ``"avg"``, a division) is queued on the side stream, and an
   event is recorded after it;
3. ``Work.wait()`` makes the *current stream* wait for that event: the optimizer's kernels
   run after the average arrived. The host never blocks, as in PyTorch's NCCL backend.

The other collectives follow the same three steps. NCCL has no gather or scatter: they are
point-to-point sends and receives in one NCCL group (``groupStart`` ... ``groupEnd``), and
the root copies its own part, as PyTorch's NCCL backend does.

**A rank that leaves** early is reported by the base class's "leaving" notices only in the
MPI calls (barriers, the checks' all-gathers, the rendezvous); a ``Work.wait()`` here does not
block the host, so NCCL's collectives are not covered: a peer that left makes the GPU stream
wait for it.

``NCCL_NVLS_ENABLE`` (NVLink multicast) is set to ``0`` unless the environment sets it: the
device machines run with multicast off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from tinytrain import backend
from tinytrain.distributed.process_group import DEFAULT_TIMEOUT, ProcessGroup, StallTimer, Work

_DTYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
           "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
           "int64": "NCCL_INT64"}
_OPS = {"sum": "NCCL_SUM", "avg": "NCCL_AVG", "max": "NCCL_MAX", "min": "NCCL_MIN",
        "product": "NCCL_PROD"}


def nccl_module() -> Any:
    """``cupy.cuda.nccl``, or a RuntimeError that says what is missing."""
    cp = backend.cupy_module()
    from cupy.cuda import nccl

    if not nccl.available:
        raise RuntimeError(
            f"the nccl backend needs the NCCL library, which CuPy {cp.__version__} could not "
            "load: pip install nvidia-nccl-cu12 (or -cu13, matching your CuPy)")
    return nccl


class NCCLGroup(ProcessGroup):
    """The ``nccl`` backend (see the module docstring)."""

    backend = "nccl"
    device = "cuda"
    dtypes = tuple(_DTYPES)
    _batch: list[Work] | None = None  # the Works of a batch_isend_irecv being started

    def __init__(self, comm: Any, nccl: Any = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(comm, timeout)
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # read when the communicator starts
        self.cp = backend.cupy_module()
        self.nccl = nccl or nccl_module()
        gpus = self.cp.cuda.runtime.getDeviceCount()
        if self.local_size > gpus:
            raise RuntimeError(
                f"nccl backend, rank {self.rank}: {self.local_size} ranks run on this machine "
                f"but it has {gpus} GPU(s); start at most one rank per GPU")
        self.cp.cuda.Device(self.local_rank).use()
        uid = self.nccl.get_unique_id() if self.rank == 0 else None
        uid = comm.bcast(uid, root=0)
        self.communicator = self.nccl.NcclCommunicator(self.world_size, uid, self.rank)
        self.stream = self.cp.cuda.Stream(non_blocking=True)

    def _side_stream_after_current(self) -> None:
        """Step 1: the side stream waits for what the current stream has queued so far."""
        ready = self.cp.cuda.Event(disable_timing=True)
        ready.record(self.cp.cuda.get_current_stream())
        self.stream.wait_event(ready)

    def _done(self, what: str, keep: Any, ordered: bool = True) -> Work:
        """Step 2's end: an event after the operation, for ``wait()``; the Work keeps
        ``keep`` (the arrays NCCL reads and writes) alive until the current stream waits for
        it (a freed array's memory goes back to CuPy's pool, for the current stream's next
        allocation, while NCCL may still write into it on the side stream)."""
        if self._batch is not None:  # NCCL starts the batch at its groupEnd: see batch()
            work = _NCCLWork(self, what, None, keep, ordered)
            self._batch.append(work)
            return self._track(work)
        done = self.cp.cuda.Event(disable_timing=True)
        done.record(self.stream)
        return self._track(_NCCLWork(self, what, done, keep, ordered))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """The sends and receives started inside run as one NCCL group (two ranks may both
        send first): NCCL queues them at the group's end, so the event every Work of the
        batch waits for is recorded there."""
        self.nccl.groupStart()
        self._batch = []
        try:
            yield
        finally:
            self.nccl.groupEnd()
            works, self._batch = self._batch, None
            done = self.cp.cuda.Event(disable_timing=True)
            done.record(self.stream)
            for work in works:
                work.done = done

    def _start(self) -> None:
        """Step 1, for every collective (each is counted for the call checks)."""
        self.collectives += 1
        self._side_stream_after_current()

    def _dtype(self, array: Any) -> Any:
        return getattr(self.nccl, _DTYPES[array.dtype.name])

    def all_reduce(self, array: Any, op: str = "sum") -> Work:
        return self._reduce(f"all_reduce(op={op!r}) of {self.describe(array)}", array, op, None)

    def _nccl_op(self, op: str) -> tuple[Any, bool]:
        """NCCL's op for ``op`` and whether to divide afterwards (NCCL before 2.10 has no
        ncclAvg: sum, then divide)."""
        nccl_op = getattr(self.nccl, _OPS[op], None)
        return (self.nccl.NCCL_SUM, True) if nccl_op is None else (nccl_op, False)

    def reduce(self, array: Any, dst: int, op: str = "sum") -> Work:
        return self._reduce(f"reduce(dst={dst}, op={op!r}) of {self.describe(array)}", array,
                            op, dst)

    def _reduce(self, what: str, array: Any, op: str, dst: int | None) -> Work:
        """ncclAllReduce (``dst`` None) or ncclReduce to ``dst``, in place."""
        self._start()
        ptr = array.data.ptr
        nccl_op, divide = self._nccl_op(op)
        if dst is None:
            self._call(what, self.communicator.allReduce, ptr, ptr, array.size,
                       self._dtype(array), nccl_op, self.stream.ptr)
        else:
            self._call(what, self.communicator.reduce, ptr, ptr, array.size,
                       self._dtype(array), nccl_op, dst, self.stream.ptr)
        if divide and dst in (None, self.rank):
            # Measured on 2 H200s: this one division on the side stream made the *next*
            # forward's host time 0.4-0.7 ms longer (3.0-3.8 ms per convnet step instead of
            # 2.4 ms), which is why ncclAvg (the division inside NCCL's kernel) is used above.
            with self.stream:
                self.cp.true_divide(array, self.world_size, out=array)
        return self._done(what, array)

    def broadcast(self, array: Any, src: int = 0) -> Work:
        self._start()
        what = f"broadcast(src={src}) of {self.describe(array)}"
        self._call(what, self.communicator.bcast,
                   array.data.ptr, array.size, self._dtype(array), src, self.stream.ptr)
        return self._done(what, array)

    def all_gather(self, array: Any, out: Any) -> Work:
        self._start()
        what = f"all_gather of {self.describe(array)}"
        self._call(what, self.communicator.allGather,
                   array.data.ptr, out.data.ptr, array.size, self._dtype(array),
                   self.stream.ptr)
        return self._done(what, (array, out))

    def reduce_scatter(self, array: Any, out: Any, op: str = "sum") -> Work:
        """ncclReduceScatter: rank ``r``'s ``out`` gets part ``r`` of the reduction."""
        self._start()
        what = f"reduce_scatter(op={op!r}) of {self.describe(array)}"
        nccl_op, divide = self._nccl_op(op)
        self._call(what, self.communicator.reduceScatter, array.data.ptr, out.data.ptr,
                   out.size, self._dtype(out), nccl_op, self.stream.ptr)
        if divide:
            with self.stream:
                self.cp.true_divide(out, self.world_size, out=out)
        return self._done(what, (array, out))

    def all_to_all(self, array: Any, out: Any, send_counts: list[int],
                   recv_counts: list[int]) -> Work:
        """NCCL has no all-to-all: a send to and a receive from every rank (itself
        included) in one NCCL group, as PyTorch's NCCL backend does."""
        self._start()
        what = f"all_to_all of {self.describe(array)}"
        item = array.dtype.itemsize
        sends = [sum(send_counts[:r]) * item for r in range(self.world_size)]
        recvs = [sum(recv_counts[:r]) * item for r in range(self.world_size)]
        calls = [(kind, base + offset, r, count)
                 for r in range(self.world_size)
                 for kind, base, offset, count in
                 (("send", array.data.ptr, sends[r], send_counts[r]),
                  ("recv", out.data.ptr, recvs[r], recv_counts[r])) if count]
        self._point_to_point(what, calls, array)
        return self._done(what, (array, out))

    def send(self, array: Any, dst: int, tag: int = 0) -> Work:
        """ncclSend on the side stream (NCCL has no tags: ``tag`` is ignored, as by
        PyTorch's NCCL backend; sends to one peer pair with its receives in order)."""
        self._side_stream_after_current()
        what = f"send(dst={dst}) of {self.describe(array)}"
        self._point_to_point(what, [("send", array.data.ptr, dst, array.size)], array)
        return self._done(what, array, ordered=False)

    def recv(self, array: Any, src: int | None, tag: int = 0) -> Work:
        """ncclRecv on the side stream; ``src`` must be given (NCCL cannot receive from
        any source)."""
        if src is None:
            raise NotImplementedError(
                f"recv on rank {self.rank} (nccl backend): src=None (from any rank) is not "
                "supported: NCCL receives from a given rank only; pass src")
        self._side_stream_after_current()
        what = f"recv(src={src}) of {self.describe(array)}"
        self._point_to_point(what, [("recv", array.data.ptr, src, array.size)], array)
        work = self._done(what, array, ordered=False)
        work.source = src
        return work

    def gather(self, array: Any, out: Any | None, dst: int) -> Work:
        self._start()
        what = f"gather(dst={dst}) of {self.describe(array)}"
        if self.rank != dst:
            self._point_to_point(what, [("send", array.data.ptr, dst, array.size)], array)
        else:
            parts = self._parts(out, array)
            self._point_to_point(what, [("recv", parts[r], r, array.size)
                                        for r in self._others(dst)], array)
            self._copy_on_side_stream(parts[dst], array.data.ptr, array.nbytes)
        return self._done(what, (array, out))

    def scatter(self, stack: Any | None, out: Any, src: int) -> Work:
        self._start()
        what = f"scatter(src={src}) of {self.describe(out)}"
        if self.rank != src:
            self._point_to_point(what, [("recv", out.data.ptr, src, out.size)], out)
        else:
            parts = self._parts(stack, out)
            self._point_to_point(what, [("send", parts[r], r, out.size)
                                        for r in self._others(src)], out)
            self._copy_on_side_stream(out.data.ptr, parts[src], out.nbytes)
        return self._done(what, (stack, out))

    def _others(self, root: int) -> list[int]:
        return [r for r in range(self.world_size) if r != root]

    def _parts(self, whole: Any, part: Any) -> list[int]:
        """The device addresses of the ``world_size`` parts of ``whole``, each ``part``'s size."""
        return [whole.data.ptr + r * part.nbytes for r in range(self.world_size)]

    def _point_to_point(self, what: str, calls: list[tuple[str, int, int, int]],
                        like: Any) -> None:
        """ncclSend / ncclRecv of ``like``'s dtype (``(kind, address, peer, count)``), as one
        NCCL group on the side stream."""
        self.nccl.groupStart()
        try:
            for kind, ptr, peer, count in calls:
                fn = self.communicator.send if kind == "send" else self.communicator.recv
                self._call(what, fn, ptr, count, self._dtype(like), peer, self.stream.ptr)
        finally:
            self.nccl.groupEnd()

    def _copy_on_side_stream(self, dst: int, src: int, nbytes: int) -> None:
        runtime = self.cp.cuda.runtime
        runtime.memcpyAsync(dst, src, nbytes, runtime.memcpyDeviceToDevice, self.stream.ptr)

    def barrier(self) -> Work:
        self.complete()
        self.cp.cuda.get_current_stream().synchronize()
        self.stream.synchronize()
        return super().barrier()

    def stall_timer(self) -> StallTimer:
        return _GPUStallTimer(self.cp)

    def destroy(self, rendezvous: bool = True, at_exit: bool = False) -> None:
        if rendezvous:
            self.complete()
        self.stream.synchronize()
        self.communicator.destroy()
        super().destroy(rendezvous, at_exit)

    def _call(self, what: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except self.nccl.NcclError as exc:
            raise RuntimeError(f"{what} failed on rank {self.rank} of {self.world_size} (nccl "
                               f"backend): {exc}") from None


class _NCCLWork(Work):
    """Step 3: ``wait()`` orders the current stream after the collective (no host wait)."""

    def __init__(self, group: NCCLGroup, what: str, done: Any, keep: Any,
                 ordered: bool = True) -> None:
        super().__init__(group, what, keep, ordered)
        self.done, self.cp = done, group.cp
        self.source: int | None = None

    def _block(self) -> None:
        self.cp.cuda.get_current_stream().wait_event(self.done)

    def _test(self) -> bool:
        return self.done is not None and bool(self.done.done)


class _GPUStallTimer(StallTimer):
    """How long the current stream sat waiting for communication, measured on the GPU:
    events recorded before and after the stream waits for the collectives."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self._events = (cp.cuda.Event(), cp.cuda.Event())

    def start(self) -> None:
        self._events[0].record(self.cp.cuda.get_current_stream())

    def stop(self) -> None:
        self._events[1].record(self.cp.cuda.get_current_stream())

    def seconds(self) -> float:
        self._events[1].synchronize()
        return self.cp.cuda.get_elapsed_time(*self._events) / 1000
