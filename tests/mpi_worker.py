"""What each rank runs in tests/test_distributed_mpi.py: ``mpiexec -n 2 python
tests/mpi_worker.py SCENARIO [--backend mpi|nccl]``.

A scenario checks with asserts and prints ``ok <scenario> rank <r>`` when every check passed;
an assert that fails raises, which aborts every rank (exit code != 0). Scenarios that are
meant to fail print a marker first, so the test knows how far they got.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import numpy as np

import tinytrain as tt
import tinytrain.distributed as dist
from tinytrain import nn


def collectives(device: str) -> None:
    g = dist.group()
    r, R = g.rank, g.world_size
    dtypes = ["float32", "float64", "float16", "int32", "int64", "uint8"]
    shapes = [(), (1,), (3, 4), (2, 3, 5), (1000,)]
    for dtype in dtypes:
        for shape in shapes:
            base = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 7
            everyone = [(base + k + 1).astype(dtype) for k in range(R)]  # rank k's values
            for op, expect in [("sum", sum(e.astype(np.float64) for e in everyone)),
                               ("max", np.max(everyone, axis=0)),
                               ("min", np.min(everyone, axis=0)),
                               ("product", np.prod(everyone, axis=0))] + (
                    [("avg", sum(e.astype(np.float64) for e in everyone) / R)]
                    if dtype.startswith("float") else []):
                t = tt.tensor(everyone[r], device=device)
                assert dist.all_reduce(t, op) is None
                assert t.dtype == np.dtype(dtype) and t.shape == shape
                np.testing.assert_array_equal(t.numpy(), np.asarray(expect).astype(dtype),
                                              err_msg=f"{op} {dtype} {shape}")
            t = tt.tensor(everyone[r], device=device)
            dist.broadcast(t, src=R - 1)
            np.testing.assert_array_equal(t.numpy(), everyone[R - 1], err_msg=f"bcast {dtype}")
    # async: several collectives in flight at once, then waited for in reverse order
    ts = [tt.tensor(np.full(100 * (k + 1), float(r + k), np.float32), device=device)
          for k in range(4)]
    works = [dist.all_reduce(t, "sum", async_op=True) for t in ts]
    for w in reversed(works):
        w.wait()
        assert w.is_completed() or device == "cuda"
    for k, t in enumerate(ts):
        np.testing.assert_array_equal(t.numpy(), sum(float(q + k) for q in range(R)))
    # bool, as in PyTorch: sum and max are a logical or, min a logical and
    for op, expect in [("sum", [True, True, False]), ("max", [True, True, False]),
                       ("min", [True, False, False])]:
        t = tt.tensor([True, r == 0, False], device=device)
        dist.all_reduce(t, op)
        assert t.dtype == np.dtype(bool) and t.numpy().tolist() == expect, (op, t)
    try:
        dist.all_reduce(tt.tensor([True], device=device), "avg")
    except TypeError as exc:
        assert f"rank {r}" in str(exc) and "needs a floating-point tensor, got bool" in str(exc)
    else:
        raise AssertionError("an average of bools was accepted")
    # NaN, as with PyTorch's gloo: max and min are NaN wherever any rank has one, on every
    # rank (MPI's own MAX kept or dropped it by operand order, which differs between ranks;
    # NCCL's, as PyTorch over NCCL, drops it, the same on every rank)
    for op in ("max", "min") if device == "cpu" else ():
        for dtype in ("float16", "float32", "float64"):
            t = tt.tensor(np.array([np.nan if r == 0 else 1.0, 2.0 + r,
                                    np.nan if r == R - 1 else -1.0], dtype), device=device)
            dist.all_reduce(t, op)
            got = t.numpy()
            want = 2.0 + (R - 1 if op == "max" else 0)
            assert np.isnan(got[0]) and got[1] == want and np.isnan(got[2]), (op, dtype, got)
    # errors name the rank and the operation
    for bad, kind, words in [
        (np.ones(3, np.float32), TypeError, "expected a tinytrain Tensor"),
    ]:
        try:
            dist.all_reduce(bad)
        except kind as exc:
            assert f"rank {r}" in str(exc) and "all_reduce" in str(exc) and words in str(exc), exc
        else:
            raise AssertionError(f"no {kind.__name__} for {words}")
    if device == "cuda":  # the nccl backend refuses CPU tensors
        try:
            dist.all_reduce(tt.ones(3))
        except RuntimeError as exc:
            assert "on cpu" in str(exc) and f"rank {r}" in str(exc), exc
        else:
            raise AssertionError("a CPU tensor was accepted by nccl")
    dist.barrier()


def _contribution(k: int, dtype: str, shape: tuple) -> np.ndarray:
    """What rank ``k`` sends in gather_collectives: distinct per rank, small enough that
    products stay exact."""
    n = int(np.prod(shape))
    values = (np.arange(n) * (k + 2) + 3 * k + 1) % 5 + 1  # 1..5
    if dtype == "bool":
        return ((np.arange(n) + k) % 3 != 0).reshape(shape)
    return (values * (-1) ** k).astype(dtype).reshape(shape)


def _expect_raise(kind: type, words: list[str], fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except kind as exc:
        assert all(w in str(exc) for w in words), (words, str(exc))
    else:
        raise AssertionError(f"no {kind.__name__} for {words}")


def gather_collectives(device: str) -> None:
    """all_gather(_into_tensor), gather, scatter, reduce, PRODUCT and the object collectives:
    every value checked against what each rank contributed (computed here for every rank)."""
    r, R = dist.get_rank(), dist.get_world_size()
    dst = 1 % R  # not rank 0, the default
    for dtype in ("float32", "float64", "int64", "bool"):
        for shape in [(), (1,), (7,), (3, 5), (2, 3, 5)]:
            everyone = [_contribution(k, dtype, shape) for k in range(R)]
            mine = everyone[r]
            tensor = tt.tensor(mine, device=device)
            where = f"{dtype} {shape}"
            # all_gather into preallocated tensors, sync and async
            for async_op in (False, True):
                outs = [tt.zeros(*shape, dtype=dtype, device=device) for _ in range(R)]
                work = dist.all_gather(outs, tensor, async_op=async_op)
                assert (work is None) != async_op
                if async_op:
                    work.wait()
                    assert work.is_completed()
                for k in range(R):
                    assert outs[k].dtype == np.dtype(dtype) and outs[k].shape == shape
                    np.testing.assert_array_equal(outs[k].numpy(), everyone[k], where)
            np.testing.assert_array_equal(tensor.numpy(), mine)  # the input is untouched
            if len(shape) == 2:  # a transposed input is sent from a copy, as in PyTorch
                outs = [tt.zeros(*shape[::-1], dtype=dtype, device=device) for _ in range(R)]
                dist.all_gather(outs, tensor.T)
                for k in range(R):
                    np.testing.assert_array_equal(outs[k].numpy(), everyone[k].T, where)
            # all_gather_into_tensor: stacked, and concatenated along dim 0
            forms = [(R, *shape)] + ([(R * shape[0], *shape[1:])] if shape else [])
            for form in forms:
                out = tt.zeros(*form, dtype=dtype, device=device)
                dist.all_gather_into_tensor(out, tensor)
                np.testing.assert_array_equal(
                    out.numpy(), np.stack(everyone).reshape(form), f"{where} into {form}")
            # gather to dst; the others pass no list
            gathered = ([tt.zeros(*shape, dtype=dtype, device=device) for _ in range(R)]
                        if r == dst else None)
            assert dist.gather(tensor, gathered, dst=dst) is None
            if r == dst:
                for k in range(R):
                    np.testing.assert_array_equal(gathered[k].numpy(), everyone[k], where)
            # scatter from the last rank: rank k gets part k
            parts = [tt.tensor(_contribution(k + 7, dtype, shape), device=device)
                     for k in range(R)] if r == R - 1 else None
            out = tt.zeros(*shape, dtype=dtype, device=device)
            dist.scatter(out, parts, src=R - 1)
            np.testing.assert_array_equal(out.numpy(), _contribution(r + 7, dtype, shape), where)
            # reduce: only dst gets the result, the others keep their values
            stack = np.stack(everyone)
            wanted = {"sum": stack.sum(0), "max": stack.max(0), "min": stack.min(0),
                      "product": stack.prod(0)}
            if dtype == "bool":  # as PyTorch: or, or, and, and
                wanted = {"sum": stack.any(0), "max": stack.any(0), "min": stack.all(0),
                          "product": stack.all(0)}
            if dtype.startswith("float"):
                wanted["avg"] = stack.sum(0) / R
            for op, want in wanted.items():
                t = tt.tensor(mine, device=device)
                dist.reduce(t, dst=dst, op=op)
                np.testing.assert_array_equal(
                    t.numpy(), np.asarray(want).astype(dtype) if r == dst else mine,
                    f"reduce {op} {where}")
                t = tt.tensor(mine, device=device)
                dist.all_reduce(t, op=dist.ReduceOp.PRODUCT if op == "product" else op)
                np.testing.assert_array_equal(t.numpy(), np.asarray(want).astype(dtype),
                                              f"all_reduce {op} {where}")
    # objects: any picklable value, of a different size on each rank
    objects = [None] * R
    dist.all_gather_object(objects, {"rank": r, "items": list(range(r)), "name": "r" * r})
    assert objects == [{"rank": k, "items": list(range(k)), "name": "r" * k}
                       for k in range(R)], objects
    sent = [("from", R - 1), np.arange(R - 1), {"nested": [R - 1]}]
    received = list(sent) if r == R - 1 else [None, None, None]
    dist.broadcast_object_list(received, src=R - 1)
    assert received[0] == ("from", R - 1) and received[2] == {"nested": [R - 1]}
    np.testing.assert_array_equal(received[1], np.arange(R - 1))
    gathered = [None] * R if r == 1 else None
    dist.gather_object({"rank": r, "files": [f"img{r}.png"] * r}, gathered, dst=1)
    if r == 1:
        assert gathered == [{"rank": k, "files": [f"img{k}.png"] * k} for k in range(R)]
    mine = [None]
    dist.scatter_object_list(mine, [("for", k, list(range(k))) for k in range(R)]
                             if r == 0 else None)
    assert mine == [("for", r, list(range(r)))], mine
    longer = [None] * R + ["kept"] if r == 0 else None  # PyTorch fills the first R entries
    dist.gather_object(r * 10, longer, dst=0)
    assert r != 0 or longer == [k * 10 for k in range(R)] + ["kept"], longer
    mine = [None]
    dist.scatter_object_list(mine, tuple(range(R)) if r == 0 else None)  # any sequence
    assert mine == [r]
    if r == 0:
        _expect_raise(ValueError, ["the source rank must provide scatter_object_input_list"],
                      dist.scatter_object_list, [None], None)
    # errors raised on this rank before any communication name the rank and the shapes
    t = tt.ones(4, device=device)
    _expect_raise(ValueError, [f"all_gather on rank {r} of {R}", f"has {R + 1} tensors",
                               f"one per rank, {R}"],
                  dist.all_gather, [tt.ones(4, device=device)] * (R + 1), t)
    _expect_raise(ValueError, [f"rank {r} of {R}", "tensor_list[1] is float32 [5] but the "
                               "tensor is float32 [4]"],
                  dist.all_gather, [t, tt.ones(5, device=device)] + [t] * (R - 2), t)
    _expect_raise(ValueError, ["tensor_list[0] is float64 [4] but the tensor is float32 [4]"],
                  dist.all_gather, [tt.ones(4, dtype="float64", device=device)] * R, t)
    _expect_raise(ValueError, [f"all_gather_into_tensor on rank {r} of {R}", "output_tensor "
                               f"is float32 [{R}, 5]", f"[{4 * R}] or [{R}, 4]"],
                  dist.all_gather_into_tensor, tt.zeros(R, 5, device=device), t)
    _expect_raise(ValueError, [f"reduce on rank {r}: dst is required"], dist.reduce, t)
    _expect_raise(ValueError, [f"gather on rank {r}: dst={R} is not a rank of this group of "
                               f"{R}"], dist.gather, t, None, dst=R)
    if r == 0:
        _expect_raise(ValueError, ["gather_list must be given on the destination rank"],
                      dist.gather, t)
    else:
        _expect_raise(ValueError, [f"gather(dst=0) on rank {r}: gather_list must not be given"],
                      dist.gather, t, [t] * R)
    _expect_raise(ValueError, [f"all_gather_object on rank {r} of {R}: object_list has 1 "
                               f"entries; it needs one per rank, {R}"],
                  dist.all_gather_object, [None], r)
    _expect_raise(ValueError, ["group=", "has one group"], dist.all_gather, [t] * R, t,
                  group="world")
    # a model with nothing to train is refused, as in PyTorch
    _expect_raise(RuntimeError, ["is not needed when a module doesn't have any parameter that "
                                 "requires a gradient"],
                  dist.DistributedDataParallel, nn.Linear(2, 2).to(device).requires_grad_(False))
    dist.barrier()  # every rank is still in step after the errors
    print(f"ok gather_collectives rank {r}", flush=True)


class Chain(nn.Module):
    """Five linear layers: parameters of known sizes, registered in order."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(5)])

    def forward(self, x):
        return self.layers(x)


def ddp_buckets(device: str) -> None:
    """Bucket order and sizes; grads are views; an all-reduce starts before backward ends."""
    from tinytrain.backend import get_array_module

    g = dist.group()
    tt.manual_seed(100 + g.rank)  # different initial weights on purpose: broadcast fixes them
    model = Chain().to(device)
    # record when each gradient is ready (these hooks run before DDP's) and when each
    # bucket's all-reduce starts
    events: list[str] = []
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: events.append(f"grad {name}"))
    cap = 64 * 64 * 4 + 64 * 4  # one layer (weight + bias) in bytes
    ddp = dist.DistributedDataParallel(model, bucket_cap_mb=2 * cap / 2**20,
                                       first_bucket_cap_mb=cap / 2**20)
    ddp.check_consistency()  # broadcast before wrap: identical weights on every rank
    names = [b.names for b in ddp.buckets]
    assert names == [["layers.4.bias", "layers.4.weight"],
                     ["layers.3.bias", "layers.3.weight", "layers.2.bias", "layers.2.weight"],
                     ["layers.1.bias", "layers.1.weight", "layers.0.bias", "layers.0.weight"]
                     ], names
    assert [b.nbytes for b in ddp.buckets] == [cap, 2 * cap, 2 * cap]
    assert all(p.grad is None for p in model.parameters())  # as in PyTorch, until forward
    real = g.all_reduce

    def recording(array, op="sum"):
        events.append(f"all_reduce {array.nbytes}")
        return real(array, op)

    g.all_reduce = recording
    x = tt.randn(16, 64, device=device)
    opt = tt.optim.SGD(ddp.parameters(), lr=0.1)
    opt.zero_grad()
    out = ddp(x)
    for b in ddp.buckets:
        xp = get_array_module(b.buffer)
        for p in b.params:  # forward bound every .grad to a view into its bucket
            assert p.grad is not None and xp.shares_memory(p.grad._data, b.buffer)
    out.sum().backward()
    g.all_reduce = real
    starts = [i for i, e in enumerate(events) if e.startswith("all_reduce")]
    grads = [i for i, e in enumerate(events) if e.startswith("grad")]
    assert len(starts) == 3 and len(grads) == 10, events
    assert starts[0] < grads[-1], f"no all-reduce started before backward ended: {events}"
    # bucket 0 starts as soon as its two gradients are ready, then the others in order
    assert sorted(events[:3]) == ["all_reduce 16640", "grad layers.4.bias",
                                  "grad layers.4.weight"] and starts[0] == 2, events
    assert [events[i] for i in starts] == ["all_reduce 16640", "all_reduce 33280",
                                           "all_reduce 33280"], events
    opt.step()
    ddp.check_consistency()
    print(f"ok ddp_buckets rank {g.rank}", flush=True)


def ddp_features(device: str) -> None:
    """no_sync accumulation equals one big batch; find_unused_parameters; check_every."""
    g = dist.group()
    r, R = g.rank, g.world_size
    tt.manual_seed(0)
    model = Chain(8).to(device, tt.float64)
    ddp = dist.DistributedDataParallel(model, check_every=2)
    reference = Chain(8).to(device, tt.float64)
    reference.load_state_dict(model.state_dict())
    rng = np.random.default_rng(1)
    xs = [tt.tensor(rng.standard_normal((4 * R, 8)), device=device) for _ in range(3)]
    # accumulate 3 micro-batches locally, then one synchronised backward averages the sum
    with ddp.no_sync():
        for x in xs[:2]:
            ddp(x[4 * r:4 * r + 4]).sum().backward()
    ddp(xs[2][4 * r:4 * r + 4]).sum().backward()
    for x in xs:
        reference(x).sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy() * R, q.grad.numpy(), rtol=1e-12,
                                   err_msg=name)
    # a copy of the wrapper would share its process group and buckets: refused, clearly
    _expect_raise(TypeError, ["copy.deepcopy(ddp.module)"], copy.deepcopy, ddp)
    snapshot = copy.deepcopy(ddp.module)  # what to copy (an EMA, the best model)
    assert all(p.grad is None for p in snapshot.parameters())

    # unused parameters are allowed when asked for, with PyTorch's gradients: a head used on
    # rank 0 only gets rank 0's gradient averaged with zeros; one no rank uses keeps no
    # .grad, so SGD with momentum and weight decay leaves it alone
    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.mine, self.unused = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)

        def forward(self, x):
            h = self.body(x)
            return self.mine(h) if r == 0 else h.sum(dim=1, keepdim=True)

    tt.manual_seed(0)
    ddp2 = dist.DistributedDataParallel(Heads().to(device), find_unused_parameters=True)
    unused_before = ddp2.module.unused.weight.numpy().copy()
    opt = tt.optim.SGD(ddp2.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    for _ in range(2):
        opt.zero_grad()
        x = tt.ones(2, 4, device=device) * (r + 1)
        with tt.no_grad():
            h0 = ddp2.module.body(tt.ones(2, 4, device=device))  # rank 0's input
        ddp2(x).sum().backward()
        assert ddp2.module.unused.weight.grad is None and ddp2.module.unused.bias.grad is None
        np.testing.assert_allclose(ddp2.module.mine.weight.grad.numpy(),
                                   h0.sum(dim=0, keepdim=True).numpy() / R, rtol=1e-5)
        opt.step()
    np.testing.assert_array_equal(ddp2.module.unused.weight.numpy(), unused_before)
    ddp2.check_consistency()
    # a .grad that was there before the step is kept, not unset
    opt.zero_grad()
    ddp2.module.unused.weight.grad = tt.full_like(ddp2.module.unused.weight, 3.0)
    ddp2(tt.ones(2, 4, device=device)).sum().backward()
    assert (ddp2.module.unused.weight.grad.numpy() == 3.0).all()
    assert ddp2.module.unused.bias.grad is None
    print(f"ok ddp_features rank {r}", flush=True)


def zero_grad_after_forward(device: str) -> None:
    tt.manual_seed(0)
    model = dist.DistributedDataParallel(Chain(8).to(device))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    x = tt.randn(4, 8, device=device)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    print("first step ok", flush=True)
    out = model(x)
    opt.zero_grad(set_to_none=True)   # InfiniTrain's bug: after forward
    out.sum().backward()
    print("the bug went unnoticed", flush=True)


def forward_bypassed(device: str) -> None:
    tt.manual_seed(0)
    model = dist.DistributedDataParallel(Chain(8).to(device))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    x = tt.randn(4, 8, device=device)
    opt.zero_grad(set_to_none=True)   # before the forward, as it should be
    model(x).sum().backward()
    opt.step()
    print("first step ok", flush=True)
    opt.zero_grad(set_to_none=True)
    model.module(x).sum().backward()  # DDP's forward skipped: nothing would be averaged
    print("the bug went unnoticed", flush=True)


def unused_parameter(device: str) -> None:
    class Unused(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            return self.a(x)

    model = dist.DistributedDataParallel(Unused().to(device))
    model(tt.ones(2, 4, device=device)).sum().backward()
    print("the unused parameter went unnoticed", flush=True)


def diverged(device: str) -> None:
    model = dist.DistributedDataParallel(Chain(8).to(device), check_every=3)
    if dist.get_rank() == 1:
        with tt.no_grad():
            model.module.layers[2].bias.data[0] += 1  # an update outside the optimizer
    for _ in range(3):
        model(tt.ones(2, 8, device=device)).sum().backward()
    print("the divergence went unnoticed", flush=True)


def dtype_after_wrap(device: str) -> None:
    model = dist.DistributedDataParallel(Chain(8).to(device))
    model(tt.ones(2, 8, device=device)).sum().backward()  # the .grads are bound views now
    model.to(dtype=tt.float64)  # after wrapping: the buckets are float32
    model(tt.ones(2, 8, device=device, dtype=tt.float64)).sum().backward()
    print("the cast went unnoticed", flush=True)


def init_arguments(device: str) -> None:
    """PyTorch's init_process_group arguments: accepted when they agree with mpiexec."""
    r, R = dist.get_rank(), dist.get_world_size()
    dist.destroy_process_group()
    dist.init_process_group(None, init_method="env://", world_size=R, rank=r)
    assert dist.get_backend() == "mpi" and dist.get_rank() == r
    dist.destroy_process_group()
    # HPC scripts: a TCP or file rendezvous (MPI's is used), a device hint
    for method, device_id in (("tcp://localhost:29500", 0), ("file:///tmp/rendezvous",
                                                            tt.device("cpu"))):
        dist.init_process_group("gloo", init_method=method, world_size=R, rank=r,
                                device_id=device_id)
        assert dist.get_rank() == r
        dist.destroy_process_group()
    # strings from os.environ: PyTorch's error (it used to say "rank 1 was passed, but
    # mpiexec started this process as rank 1")
    for kwargs, arg in (({"world_size": str(R), "rank": str(r)}, "rank"),
                        ({"world_size": str(R)}, "world_size")):
        try:
            dist.init_process_group("gloo", **kwargs)
        except RuntimeError as exc:
            assert f"init_process_group: `{arg}` must be an integer, got '" in str(exc), exc
        else:
            raise AssertionError(f"{kwargs} was accepted")
    for method in ("mpi://", "redis://host"):
        try:
            dist.init_process_group("gloo", init_method=method)
        except ValueError as exc:
            assert f"init_method={method!r} is not supported" in str(exc), exc
        else:
            raise AssertionError(f"init_method={method!r} was accepted")
    assert not dist.is_initialized()
    try:
        dist.init_process_group("mpi", rank=1 - r)
    except ValueError as exc:
        assert f"rank={1 - r} was passed, but mpiexec started this process as rank {r}" in str(
            exc), exc
    else:
        raise AssertionError("a rank that disagrees with mpiexec was accepted")
    dist.init_process_group("mpi")
    try:
        dist.all_reduce(tt.ones(2).numpy())
    except TypeError as exc:
        assert "p.grad, not an array" in str(exc), exc
    else:
        raise AssertionError("an array was accepted by all_reduce")
    print(f"ok init_arguments rank {r}", flush=True)


def frozen_on_one_rank(device: str) -> None:
    model = Chain(8).to(device)
    if dist.get_rank() == 1:
        model.layers[0].weight.requires_grad_(False)  # the buckets would differ
    dist.DistributedDataParallel(model)
    print("the frozen parameter went unnoticed", flush=True)


def mismatched_all_reduce(device: str) -> None:
    size = 4 if dist.get_rank() == 0 else 6
    dist.all_reduce(tt.ones(size, device=device))
    print("the mismatched all_reduce went unnoticed", flush=True)


def mismatched_op(device: str) -> None:
    dist.all_reduce(tt.ones(4, device=device), "sum" if dist.get_rank() == 0 else "max")
    print("the mismatched op went unnoticed", flush=True)


def barrier_against_all_reduce(device: str) -> None:
    if dist.get_rank() == 0:
        dist.barrier()
    else:
        dist.all_reduce(tt.ones(4, device=device))
    print("the barrier paired with an all_reduce went unnoticed", flush=True)


def mismatched_all_gather(device: str) -> None:
    r = dist.get_rank()
    t = tt.ones(6 if r == 1 else 4, device=device)
    dist.all_gather([tt.zeros_like(t) for _ in range(dist.get_world_size())], t)
    print("the mismatched all_gather went unnoticed", flush=True)


def gather_against_all_gather_object(device: str) -> None:
    if dist.get_rank() == 0:
        dist.gather(tt.ones(3, device=device), [tt.ones(3, device=device)] * 2)
    else:
        dist.all_gather_object([None, None], "metric")
    print("the gather paired with an all_gather_object went unnoticed", flush=True)


def reduce_queued_on_one_rank(device: str) -> None:
    """Rank 0 has started a reduce more than the others (the group's own call, as DDP makes
    them): the next call check, that of broadcast_object_list, names the counts."""
    if dist.get_rank() == 0:
        dist.group("test").reduce(tt.ones(5, device=device)._data, 0, "sum")
    objects = ["config"]
    dist.broadcast_object_list(objects)
    print("the uneven count went unnoticed", flush=True)


def ddp_peer_gone(device: str) -> None:
    """Rank 1 leaves (exits) after one step; rank 0's next backward waits for it: one error,
    soon after rank 1 left, not one per bucket or a second one while cleaning up."""
    tt.manual_seed(0)
    ddp = dist.DistributedDataParallel(Chain(8).to(device), first_bucket_cap_mb=0.0001)
    assert len(ddp.buckets) > 1
    ddp(tt.ones(2, 8, device=device)).sum().backward()
    if dist.get_rank() == 1:
        sys.exit(0)
    print(f"backward without rank 1 at {time.monotonic():.3f}", flush=True)
    ddp(tt.ones(2, 8, device=device)).sum().backward()


def eval_mode_training(device: str) -> None:
    """Training with the wrapper in eval mode (dropout off) still averages the gradients."""
    tt.manual_seed(0)
    model = dist.DistributedDataParallel(Chain(8).to(device)).eval()
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    x = tt.randn(4, 8, device=device) * (dist.get_rank() + 1)  # different data per rank
    for _ in range(2):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    model.check_consistency()
    print(f"ok eval_mode_training rank {dist.get_rank()}", flush=True)


def raise_on_one_rank(device: str) -> None:
    t = tt.ones(10, device=device)
    dist.all_reduce(t)
    print(f"ready rank {dist.get_rank()} pid {os.getpid()}", flush=True)
    if dist.get_rank() == 1:
        time.sleep(0.5)
        raise ValueError("rank 1 fails on purpose")
    dist.all_reduce(t)  # rank 0 waits here for a peer that is gone
    print("rank 0 was not stopped", flush=True)


def wait_forever(device: str) -> None:
    """Rank 0 sleeps, the others wait in a collective for it: for signals."""
    print(f"ready rank {dist.get_rank()} pid {os.getpid()}", flush=True)
    if dist.get_rank() == 0:
        time.sleep(120)
    dist.all_reduce(tt.ones(10, device=device))


def skip_collective(device: str) -> None:
    """The ranks other than 0 leave (destroy_process_group) without the all-reduce that rank 0
    waits in."""
    if dist.get_rank() == 0:
        print(f"waiting rank {dist.get_rank()}", flush=True)
        dist.all_reduce(tt.ones(10, device=device))
        print(f"not reached rank {dist.get_rank()}", flush=True)


def uneven_then_all_reduce(device: str) -> None:
    """Rank 0 runs one batch more, then both all-reduce a loss total (run with --timeout):
    rank 1's check of that call must not be matched with rank 0's bucket all-reduce."""
    r = dist.get_rank()
    tt.manual_seed(r)
    ddp = dist.DistributedDataParallel(nn.Linear(3, 1).to(device))
    opt = tt.optim.SGD(ddp.parameters(), lr=0.1)
    total = tt.zeros(2, device=device)
    for _ in range(3 if r == 0 else 2):
        opt.zero_grad()
        loss = ddp(tt.randn(4, 3, device=device)).pow(2).mean()
        loss.backward()
        opt.step()
        total += tt.tensor([loss.item(), 1.0], device=device)
    print(f"rank {r} at the epoch's all_reduce", flush=True)
    dist.all_reduce(total)
    print(f"the mismatch went unnoticed on rank {r}: {total.tolist()}", flush=True)


def collective_queued_on_one_rank(device: str) -> None:
    """Rank 0 has started one collective more than rank 1 (as a rank one batch ahead under
    NCCL, whose last bucket all-reduce is still queued on its GPU), then both all-reduce a
    metric: the call check must see the different counts and raise, not pair the calls."""
    r = dist.get_rank()
    if r == 0:
        dist.group("test").all_reduce(tt.ones(5, device=device)._data)  # started, not waited
    metric = tt.tensor([1.0, 2.0], device=device)
    dist.all_reduce(metric)
    print(f"the uneven count went unnoticed on rank {r}: {metric.tolist()}", flush=True)


def stall_notice(device: str) -> None:
    """Rank 1 is 3 s late to an all-reduce: rank 0 says, once, that it waits, then both
    finish normally."""
    from tinytrain.distributed import process_group

    process_group.STALL_NOTICE = 1.0  # (60 s in real runs)
    if dist.get_rank() == 1:
        time.sleep(3)
    x = tt.ones(3, device=device)
    dist.all_reduce(x)
    print(f"rank {dist.get_rank()} done: {x.tolist()}", flush=True)


def work_alone_before_exit(device: str) -> None:
    """Rank 0 works alone (writes a checkpoint) for longer than LEAVE_GRACE, and than the
    --timeout, after the last collective; rank 1 leaves meanwhile: no error on either."""
    from tinytrain.distributed.process_group import LEAVE_GRACE

    t = tt.ones(4, device=device)
    dist.all_reduce(t)
    if dist.get_rank() == 0:
        time.sleep(LEAVE_GRACE + 1.5)
    print(f"ok work_alone_before_exit rank {dist.get_rank()}", flush=True)


def sharded_evaluation(device: str) -> None:
    """The shards' counts, reduced once, equal one process's evaluation exactly."""
    from tinytrain.data import Subset
    from tinytrain.data.datasets import load_dataset
    from tinytrain.models import build_model
    from tinytrain.train import evaluate, evaluate_sharded

    tt.manual_seed(3)
    model = build_model("mlp").to(device)
    test = load_dataset("mnist-mini", train=False)
    for n in (1000, 999, 7):  # even and uneven shards, and a tiny set
        data = Subset(test, np.arange(n))
        full = evaluate(model, tt.data.DataLoader(data, batch_size=100), device)
        shard = evaluate_sharded(model, data, batch_size=64, device=device)
        assert (shard.total, shard.correct) == (full.total, full.correct) == (n, full.correct), \
            (shard, full)
        assert abs(shard.loss_sum - full.loss_sum) < 1e-3 * n, (shard, full)
    print(f"ok sharded_evaluation rank {dist.get_rank()}", flush=True)


def ddp_buffers(device: str) -> None:
    """BatchNorm's running statistics: rank 0's are copied to every rank before a forward
    that follows a training forward (PyTorch's broadcast_buffers=True), never after wrap
    with broadcast_buffers=False."""
    g = dist.group()
    r = g.rank
    momentum = 0.1
    rng = np.random.default_rng(10 + r)  # different data on each rank
    xs = [tt.tensor(rng.standard_normal((8, 3)).astype(np.float32), device=device)
          for _ in range(3)]

    def wrapped(**kwargs):
        tt.manual_seed(0)
        return dist.DistributedDataParallel(
            nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4, momentum=momentum)).to(device),
            **kwargs)

    def stats(ddp) -> np.ndarray:
        return ddp.module[1].running_mean.numpy().copy()

    def everyone(a: np.ndarray) -> list[np.ndarray]:
        return [np.array(v, dtype=np.float32) for v in g.allgather_object(a.tolist())]

    def train(ddp, x) -> None:
        ddp.zero_grad()
        ddp(x).sum().backward()
        for p in ddp.parameters():  # a plain SGD step (identical weights on every rank)
            p.data -= 0.1 * p.grad.data

    ddp = wrapped()
    train(ddp, xs[0])  # before it: the buffers of rank 0 (equal to the wrapped ones)
    after1 = everyone(stats(ddp))
    assert not np.array_equal(after1[0], after1[1])  # each rank's own batch
    with tt.no_grad():  # the batch mean the next step's BatchNorm sees on this rank
        mean = ddp.module[0](xs[1]).numpy().mean(axis=0)
    train(ddp, xs[1])
    np.testing.assert_allclose(stats(ddp), (1 - momentum) * after1[0] + momentum * mean,
                               rtol=1e-5, atol=1e-6)  # from rank 0's, not this rank's
    after2 = everyone(stats(ddp))
    ddp.eval()
    with tt.no_grad():  # follows a training forward: evaluated with rank 0's statistics
        ddp(xs[2])
    for theirs in everyone(stats(ddp)):
        np.testing.assert_array_equal(theirs, after2[0])
    ddp.check_consistency()
    ddp.module[1].running_mean.data[...] = r
    with tt.no_grad():  # follows a no_grad forward: nothing is copied (as in PyTorch)
        ddp(xs[2])
    assert (stats(ddp) == r).all()

    for kwargs in ({"broadcast_buffers": False}, {"forward_sync_buffers": False,
                                                  "broadcast_buffers": True}):
        ddp = wrapped(**kwargs)
        train(ddp, xs[0])
        train(ddp, xs[1])
        ddp.eval()
        with tt.no_grad():
            ddp(xs[2])
        mine = everyone(stats(ddp))
        assert not np.array_equal(mine[0], mine[1]), kwargs  # each rank's own statistics
    print(f"ok ddp_buffers rank {r}", flush=True)


def ddp_rewrap(device: str) -> None:
    """A model wrapped again (a notebook cell run twice, a wrapper wrapped, a group made
    anew): the wrapper whose forward ran last averages, the older ones stay idle, as in
    PyTorch (the first wrapper's hooks raised "not in its bucket")."""
    r, R = dist.get_rank(), dist.get_world_size()
    xs = np.random.default_rng(0).standard_normal((R, 4, 3))
    tt.manual_seed(0)
    model = nn.Linear(3, 2).to(device)
    expected = np.tile(xs.sum(axis=1).mean(axis=0), (2, 1))  # d sum(x W^T + b) / dW, averaged

    def check(wrapper: nn.Module, what: str) -> None:
        model.zero_grad()
        wrapper(tt.tensor(xs[r], dtype=tt.float32, device=device)).sum().backward()
        np.testing.assert_allclose(model.weight.grad.numpy(), expected, rtol=1e-5, atol=1e-6,
                                   err_msg=what)

    first = dist.DistributedDataParallel(model)
    check(first, "first wrapper")
    check(dist.DistributedDataParallel(model), "the same model wrapped again")
    check(first, "the first wrapper, used again")
    check(dist.DistributedDataParallel(dist.DistributedDataParallel(model)), "a wrapped wrapper")
    dist.destroy_process_group()
    dist.init_process_group("nccl" if device == "cuda" else "mpi")
    check(dist.DistributedDataParallel(model), "a wrapper in a new process group")
    print(f"ok ddp_rewrap rank {r}", flush=True)


def async_buffers(device: str) -> None:
    """Async collectives on temporary tensors, and handles dropped without wait(), give
    PyTorch's (gloo's) values: the arrays stay alive until the collective has completed
    (MPI wrote into memory NumPy had handed to the next array: y = zeros(2) became [1, 1]
    or [5, 5]), and a dropped handle completes, in order, by a later collective's wait or
    the next barrier."""
    r, R = dist.get_rank(), dist.get_world_size()

    def log_metric():  # fire and forget: the handle is dropped, never waited for
        x = tt.ones(2, device=device)
        dist.all_reduce(x, async_op=True)

    log_metric()
    y = tt.zeros(2, device=device)  # a new tensor, unrelated
    t = tt.tensor([float(r)], device=device)
    dist.all_reduce(t)
    assert y.tolist() == [0.0, 0.0] and t.item() == sum(range(R)), (y, t)
    w = dist.all_reduce(tt.ones(2, device=device) * 5, async_op=True)  # a temporary; kept
    y = tt.zeros(2, device=device)
    assert w.wait() is True  # as PyTorch's
    w2 = dist.broadcast(tt.full((2,), 7.0, device=device), src=0, async_op=True)
    z = tt.zeros(2, device=device)
    assert w2.wait() is True and w.is_completed() and w2.is_completed()
    assert y.tolist() == [0.0, 0.0] and z.tolist() == [0.0, 0.0], (y, z)
    works = [dist.all_reduce(tt.full((64,), float(k), device=device), async_op=True)
             for k in range(6)]
    fresh = [tt.zeros(64, device=device) for _ in range(6)]
    for work in works[::-1]:
        work.wait()
    assert all(f.abs().sum().item() == 0 for f in fresh)
    # dropped handles complete in order by a later collective's wait: averaged, copied out
    a = tt.full((3,), float(r + 1), device=device)
    dist.all_reduce(a, "avg", async_op=True)
    outs = [tt.zeros(2, device=device) for _ in range(R)]
    dist.all_gather(outs, tt.full((2,), float(r), device=device), async_op=True)
    dist.all_reduce(tt.ones(1, device=device))
    assert a.tolist() == [(R + 1) / 2] * 3, a
    assert [o.tolist() for o in outs] == [[float(k)] * 2 for k in range(R)], outs
    b = tt.full((2,), float(r), device=device)
    dist.broadcast(b, src=R - 1, async_op=True)
    dist.barrier()  # ... and by the next barrier
    assert b.tolist() == [R - 1.0] * 2, b
    w = dist.barrier(async_op=True)
    assert w.wait() is True and w.is_completed()
    print(f"ok async_buffers rank {r}", flush=True)


def ring_all_reduce(send: tt.Tensor, recv: tt.Tensor) -> None:
    """PyTorch's tutorial ("Writing Distributed Applications"): a ring all-reduce from
    isend and recv."""
    rank, size = dist.get_rank(), dist.get_world_size()
    send_buff, recv_buff, accum = send.clone(), send.clone(), send.clone()
    left, right = ((rank - 1) + size) % size, (rank + 1) % size
    for i in range(size - 1):
        if i % 2 == 0:
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def more_collectives(device: str) -> None:
    """Point to point, new_group, reduce_scatter(_tensor), all_to_all(_single), the bitwise
    ops, non-contiguous tensors, monitored_barrier: every value against what PyTorch's gloo
    gives (the formulas below; on 2 ranks the numbers of the reviewer's gloo runs)."""
    import functools

    r, R = dist.get_rank(), dist.get_world_size()
    right, left = (r + 1) % R, (r - 1) % R
    cpu = device == "cpu"
    # send / recv; recv returns the sender, also from any rank (not with NCCL)
    if r == 0:
        dist.send(tt.tensor([7.0, 8.0], device=device), 1)
    elif r == 1:
        x = tt.zeros(2, device=device)
        assert dist.recv(x, 0) == 0 and x.tolist() == [7.0, 8.0], x
    if cpu:  # (a tag of its own: from any rank, the ring's first message would match too)
        if r == 0:
            senders = set()
            for _ in range(R - 1):
                x = tt.zeros(1)
                src = dist.recv(x, tag=1)
                assert x.item() == 10.0 * src, (x, src)
                senders.add(src)
            assert senders == set(range(1, R)), senders
        else:
            dist.send(tt.tensor([10.0 * r]), 0, tag=1)
    # isend / irecv and batch_isend_irecv around the ring; the tutorial's ring all-reduce
    x = tt.zeros(2, device=device)
    works = [dist.isend(tt.full((2,), r + 1.0, device=device), right), dist.irecv(x, left)]
    assert [w.wait() for w in works] == [True, True] and x.tolist() == [left + 1.0] * 2, x
    x = tt.zeros(2, device=device)
    works = dist.batch_isend_irecv([
        dist.P2POp(dist.isend, tt.full((2,), r + 1.0, device=device), right),
        dist.P2POp(dist.irecv, x, left)])
    assert len(works) == 2 and all(w.wait() for w in works)
    assert x.tolist() == [left + 1.0] * 2, x
    summed = tt.zeros(3, device=device)
    ring_all_reduce(tt.tensor([r + 1.0, 2.0 * r, -1.0], device=device), summed)
    assert summed.tolist() == [R * (R + 1) / 2, R * (R - 1.0), -float(R)], summed
    _expect_raise(ValueError, ["Invalid destination rank"], dist.send, x, r)
    _expect_raise(ValueError, ["Invalid ``op``"], dist.P2POp, dist.all_reduce, x, left)
    if cpu:  # a message of another size than the receiving tensor
        if r == 0:
            dist.send(tt.ones(3), 1)
        elif r == 1:
            _expect_raise(RuntimeError, ["rank 0 sent 12 bytes, but the tensor (float32 [4]) "
                                         "holds 16"], dist.recv, tt.zeros(4), 0)
    # new_group of every rank is the group; a subset is refused
    g = dist.new_group()
    assert dist.new_group(list(range(R))) is g
    assert dist.get_world_size(g) == R and dist.get_rank(g) == r
    t = tt.ones(2, device=device)
    dist.all_reduce(t, group=g)
    assert t.tolist() == [float(R)] * 2
    _expect_raise(NotImplementedError, ["new_group(ranks=[0])", "one group, of every rank"],
                  dist.new_group, [0])
    # reduce_scatter: rank k gets the sum over ranks of entry k
    out = tt.zeros(2, device=device)
    dist.reduce_scatter(out, [tt.full((2,), r + 10.0 * k, device=device) for k in range(R)])
    assert out.tolist() == [R * (R - 1) / 2 + 10.0 * r * R] * 2, out  # 2 ranks: [1], [21]
    for form in [(2 * R,), (R, 2)]:  # concatenated, stacked
        out = tt.zeros(2, device=device)
        dist.reduce_scatter_tensor(out, (tt.arange(2.0 * R, device=device) + r).reshape(form))
        assert out.tolist() == [R * 2.0 * r + R * (R - 1) / 2,
                                R * (2.0 * r + 1) + R * (R - 1) / 2], out  # [1, 3], [5, 7]
    out = tt.zeros(2, device=device)
    dist.reduce_scatter_tensor(out, tt.full((2 * R,), r + 1.0, device=device), op="avg")
    assert out.tolist() == [(R + 1) / 2] * 2, out
    # all_to_all: entry q goes to rank q; sizes may differ from peer to peer
    outs = [tt.zeros(2, device=device) for _ in range(R)]
    dist.all_to_all(outs, [tt.full((2,), 10.0 * r + k, device=device) for k in range(R)])
    assert [o.tolist() for o in outs] == [[10.0 * q + r] * 2 for q in range(R)], outs
    outs = [tt.zeros(r + 1, dtype="int64", device=device) for _ in range(R)]
    dist.all_to_all(outs, [tt.full((k + 1,), 100 * r + k, dtype="int64", device=device)
                           for k in range(R)])
    assert [o.tolist() for o in outs] == [[100 * q + r] * (r + 1) for q in range(R)], outs
    out = tt.zeros(2 * R, device=device)
    dist.all_to_all_single(out, tt.arange(2.0 * R, device=device) + 10 * r)
    assert out.tolist() == [v for q in range(R) for v in (10.0 * q + 2 * r, 10.0 * q + 2 * r + 1)]
    def rows_sent_by(q: int) -> list[int]:  # to each rank k (the same as q gets from k)
        return [(k + q) % 2 + 1 for k in range(R)]

    def rows_of(q: int) -> np.ndarray:
        return (np.arange(sum(rows_sent_by(q)) * 3).reshape(-1, 3) + 100 * q).astype("float32")

    rows = rows_sent_by(r)
    out = tt.zeros(sum(rows), 3, device=device)
    mine = tt.tensor(rows_of(r), device=device)
    dist.all_to_all_single(out, mine, rows, rows)
    expect = [rows_of(q)[sum(rows_sent_by(q)[:r]):sum(rows_sent_by(q)[:r + 1])]
              for q in range(R)]
    np.testing.assert_array_equal(out.numpy(), np.concatenate(expect))
    bad = [rows[q] + (q == (r + 1) % R and r == 0) for q in range(R)]
    _expect_raise(ValueError, ["all_to_all_single", "rank 1 sends", "elements to rank 0"],
                  dist.all_to_all_single, tt.zeros(sum(bad), 3, device=device), mine, bad, rows)
    # bitwise reductions of integer and bool tensors (gloo's); none for floats, nor NCCL
    for dtype in ("int32", "uint8", "int64"):
        everyone = [np.array([5, 3, 12], dtype) + k for k in range(R)]
        for op, fn in (("band", np.bitwise_and), ("bor", np.bitwise_or),
                       ("bxor", np.bitwise_xor)):
            t = tt.tensor(everyone[r], device=device)
            if not cpu:
                _expect_raise(RuntimeError, [f"Cannot use ReduceOp.{op.upper()} with NCCL"],
                              dist.all_reduce, t, getattr(dist.ReduceOp, op.upper()))
                continue
            dist.all_reduce(t, getattr(dist.ReduceOp, op.upper()))
            assert t.tolist() == functools.reduce(fn, everyone).tolist(), (op, dtype, t)
    if cpu:  # 2 ranks: band [4, 0, 12], bor [7, 7, 13], bxor [3, 7, 1]
        for op, want in (("band", [True, R == 1, False]), ("bor", [True, True, False]),
                         ("bxor", [R % 2 == 1, True, False])):
            t = tt.tensor([True, r == 0, False])
            dist.all_reduce(t, op)
            assert t.dtype == np.dtype(bool) and t.tolist() == want, (op, t)
        _expect_raise(RuntimeError, ["Cannot use ReduceOp.BAND with non-integral dtype float32"],
                      dist.all_reduce, tt.ones(2), dist.ReduceOp.BAND)
    # non-contiguous tensors are reduced, broadcast and received through a copy
    b = tt.zeros(3, 4, device=device) + r
    dist.all_reduce(b[:, 1])
    expect = np.full((3, 4), float(r))
    expect[:, 1] = R * (R - 1) / 2
    np.testing.assert_array_equal(b.numpy(), expect)
    b = tt.zeros(3, 4, device=device) + r
    dist.all_reduce(b.T, "avg", async_op=True).wait()
    np.testing.assert_array_equal(b.numpy(), np.full((3, 4), (R - 1) / 2))
    b = tt.zeros(3, 4, device=device) + r
    dist.broadcast(b[:, 1], src=R - 1)
    expect = np.full((3, 4), float(r))
    expect[:, 1] = R - 1
    np.testing.assert_array_equal(b.numpy(), expect)
    b = tt.zeros(2, 3, device=device)
    if r == 0:
        dist.send(tt.tensor([5.0, 6.0], device=device), 1)
    elif r == 1:
        dist.recv(b[:, 0], 0)
        assert b[:, 0].tolist() == [5.0, 6.0] and b.sum().item() == 11.0, b
    # names
    assert dist.Backend("GLOO") == "gloo" and dist.Backend.MPI == "mpi"
    assert dist.is_gloo_available() and dist.is_mpi_available()
    assert isinstance(dist.is_nccl_available(), bool)
    dist.monitored_barrier()
    print(f"ok more_collectives rank {r}", flush=True)


def exit_mid_training(device: str) -> None:
    """Rank 1 leaves on purpose (sys.exit(3)) at its third step: rank 0's error says that
    rank 1's program ended, not only that the ranks ran different numbers of steps."""
    tt.manual_seed(0)
    model = dist.DistributedDataParallel(nn.Linear(10, 5).to(device))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        if step == 2 and dist.get_rank() == 1:
            sys.exit(3)
        opt.zero_grad()
        model(tt.ones(4, 10, device=device)).sum().backward()
        opt.step()


def _bn_training_with_forward_on_rank_0(device: str) -> None:
    """An HPC-script pattern: validation through the DDP wrapper on rank 0 only, with a
    BatchNorm model. Rank 0's extra buffer broadcast completes without rank 1 (MPI's
    broadcast completes at its root once the data has gone), and the later broadcasts pair
    one forward late: the counts differ from then on, while every later training step
    still pairs broadcasts with broadcasts and all-reduces with all-reduces."""
    tt.manual_seed(dist.get_rank())
    ddp = dist.DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8),
                                                     nn.ReLU(), nn.Linear(8, 2)).to(device))
    opt = tt.optim.SGD(ddp.parameters(), lr=0.1)
    for _ in range(2):
        ddp.train()
        for _ in range(2):
            opt.zero_grad()
            ddp(tt.randn(8, 4, device=device)).sum().backward()
            opt.step()
        if dist.get_rank() == 0:
            ddp.eval()
            with tt.no_grad():
                ddp(tt.randn(16, 4, device=device))
    print(f"trained rank {dist.get_rank()}", flush=True)


def ddp_forward_on_one_rank(device: str) -> None:
    """... then destroy_process_group() (in main) compares the ranks' counts."""
    _bn_training_with_forward_on_rank_0(device)


def ddp_forward_on_one_rank_no_destroy(device: str) -> None:
    """... then the program ends without destroy_process_group(): the at-exit one compares."""
    _bn_training_with_forward_on_rank_0(device)
    sys.exit(0)


SCENARIOS = {f.__name__: f for f in [
    ddp_rewrap, gather_collectives, mismatched_all_gather, gather_against_all_gather_object,
    reduce_queued_on_one_rank,
    collectives, ddp_buckets, ddp_features, ddp_buffers, zero_grad_after_forward, forward_bypassed,
    unused_parameter, diverged, frozen_on_one_rank, mismatched_all_reduce, mismatched_op,
    eval_mode_training, raise_on_one_rank, wait_forever, skip_collective, sharded_evaluation,
    barrier_against_all_reduce, ddp_peer_gone, dtype_after_wrap, init_arguments,
    uneven_then_all_reduce, work_alone_before_exit, collective_queued_on_one_rank,
    stall_notice, async_buffers, more_collectives, exit_mid_training, ddp_forward_on_one_rank,
    ddp_forward_on_one_rank_no_destroy]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--backend", default="mpi", choices=["mpi", "nccl"])
    p.add_argument("--timeout", type=float, default=None, help="init_process_group's, seconds")
    args = p.parse_args()
    dist.init_process_group(args.backend, timeout=args.timeout)
    SCENARIOS[args.scenario]("cuda" if args.backend == "nccl" else "cpu")
    if args.scenario == "collectives":
        print(f"ok collectives rank {dist.get_rank()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
