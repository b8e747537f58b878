"""The parts of tinytrain.distributed that need no second process: bucket assignment, the
engine's end-of-backward callback, the nccl backend's stream/event protocol (with a recording
fake of CuPy and NCCL), and the launcher's helpers. Multi-process behaviour is tested through
mpiexec in test_distributed_mpi.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinytrain as tt
from tinytrain.autograd import queue_callback
from tinytrain.distributed import launch
from tinytrain.distributed.ddp import assign_buckets
from tinytrain.distributed.nccl import _DTYPES, _OPS, NCCLGroup

KB = 1024


# ------------------------------------------------------------------ buckets


def test_buckets_take_parameters_in_reverse_order_and_close_at_the_cap():
    sizes = [4 * KB, 1 * KB, 3 * KB, 2 * KB, 2 * KB, 1 * KB]
    # reversed: 5 (1K), 4 (2K) -> 3K >= first cap 2K: closed; then 3, 2 -> 5K >= 5K: closed ...
    assert assign_buckets(sizes, first_cap=2 * KB, cap=5 * KB) == [[5, 4], [3, 2], [1, 0]]
    assert assign_buckets(sizes, first_cap=100 * KB, cap=100 * KB) == [[5, 4, 3, 2, 1, 0]]


def test_a_parameter_larger_than_the_cap_gets_its_own_bucket():
    sizes = [1 * KB, 50 * KB, 1 * KB, 1 * KB]
    assert assign_buckets(sizes, first_cap=1 * KB, cap=8 * KB) == [[3], [2, 1], [0]]


def test_different_dtypes_never_share_a_bucket():
    sizes = [KB] * 4
    keys = ["float32", "float64", "float64", "float32"]
    assert assign_buckets(sizes, 10 * KB, 10 * KB, keys) == [[3], [2, 1], [0]]


def test_convnet_fits_the_default_first_bucket():
    """The default model (861 KB of float32) is one 1 MiB bucket: no overlap with the
    defaults, which is why bench/ddp.py and chapter 7 also try smaller caps."""
    from tinytrain.models import build_model

    params = list(build_model("convnet").parameters())
    sizes = [p.nbytes for p in params]
    assert sum(sizes) < 2**20
    assert assign_buckets(sizes, 2**20, 25 * 2**20) == [list(range(len(params)))[::-1]]


# ------------------------------------------------------------------ engine callback


def test_queued_callbacks_run_after_the_whole_graph_in_order():
    events = []
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    b = tt.tensor([3.0], requires_grad=True)

    def first_leaf_hook(t):
        events.append(f"grad {t.shape}")
        if len(events) == 1:
            queue_callback(lambda: events.append("end 1"))
            queue_callback(lambda: (events.append("end 2"),
                                    queue_callback(lambda: events.append("end 3"))))

    a.register_post_accumulate_grad_hook(first_leaf_hook)
    b.register_post_accumulate_grad_hook(first_leaf_hook)
    ((a * b).sum() * 2).backward()
    assert sorted(events[:2]) == ["grad (1,)", "grad (2,)"]
    assert events[2:] == ["end 1", "end 2", "end 3"]


def test_queue_callback_outside_backward_is_an_error():
    with pytest.raises(RuntimeError, match="while a backward pass runs"):
        queue_callback(lambda: None)


def test_a_failing_backward_drops_its_callbacks():
    ran = []
    a = tt.tensor([1.0], requires_grad=True)

    def hook(t):
        queue_callback(lambda: ran.append("callback"))
        raise ValueError("hook failed")

    a.register_post_accumulate_grad_hook(hook)
    with pytest.raises(ValueError, match="hook failed"):
        (a * 2).sum().backward()
    assert ran == []
    b = tt.tensor([1.0], requires_grad=True)
    (b * 2).sum().backward()  # the next backward starts clean
    assert ran == [] and b.grad.item() == 2.0


# ------------------------------------------------------------------ nccl protocol


class _Recorder:
    """A fake of the bits of CuPy and cupy.cuda.nccl that NCCLGroup uses; logs every call."""

    def __init__(self):
        self.log = []
        rec = self

        class Event:
            count = 0

            def __init__(self, disable_timing=False):
                Event.count += 1
                self.name = f"event{Event.count}"

            def record(self, stream):
                rec.log.append(f"{self.name}.record({stream.name})")

            done = True

        class Stream:
            def __init__(self, name, ptr):
                self.name, self.ptr = name, ptr

            def wait_event(self, event):
                rec.log.append(f"{self.name}.wait({event.name})")

            def __enter__(self):
                rec.log.append(f"enter {self.name}")

            def __exit__(self, *exc):
                rec.log.append(f"exit {self.name}")

        self.current = Stream("current", 0)
        self.side = Stream("side", 77)
        class runtime:
            memcpyDeviceToDevice = "DtoD"

            @staticmethod
            def memcpyAsync(dst, src, nbytes, kind, stream):
                rec.log.append(f"copy({dst},{src},{nbytes},{kind},stream={stream})")

        self.cuda = type("cuda", (), {"Event": Event, "runtime": runtime,
                                      "get_current_stream": staticmethod(lambda: self.current)})

    def groupStart(self):
        self.log.append("groupStart")

    def groupEnd(self):
        self.log.append("groupEnd")

    def true_divide(self, array, n, out):
        self.log.append(f"divide by {n}")

    # cupy.cuda.nccl
    class NcclError(Exception):
        pass

    def __getattr__(self, name):  # NCCL_FLOAT32 -> "NCCL_FLOAT32"
        if name.startswith("NCCL_"):
            return name
        raise AttributeError(name)


class _FakeArray:
    def __init__(self, dtype, size, ptr=1234):
        self.dtype, self.size, self.shape = np.dtype(dtype), size, (size,)
        self.nbytes = size * self.dtype.itemsize
        self.data = type("mem", (), {"ptr": ptr})()


def _fake_group(world_size=2, rank=0):
    rec = _Recorder()
    g = NCCLGroup.__new__(NCCLGroup)
    g.rank, g.world_size, g.cp, g.nccl, g.stream = rank, world_size, rec, rec, rec.side
    g.in_flight, g.abandoned = [], []

    class Communicator:
        def allReduce(self, send, recv, count, dtype, op, stream):
            rec.log.append(f"allReduce({send},{recv},{count},{dtype},{op},stream={stream})")

        def bcast(self, buf, count, dtype, root, stream):
            rec.log.append(f"bcast({buf},{count},{dtype},root={root},stream={stream})")

        def reduce(self, send, recv, count, dtype, op, root, stream):
            rec.log.append(f"reduce({send},{recv},{count},{dtype},{op},root={root},"
                           f"stream={stream})")

        def allGather(self, send, recv, count, dtype, stream):
            rec.log.append(f"allGather({send},{recv},{count},{dtype},stream={stream})")

        def send(self, buf, count, dtype, peer, stream):
            rec.log.append(f"send({buf},{count},{dtype},peer={peer},stream={stream})")

        def recv(self, buf, count, dtype, peer, stream):
            rec.log.append(f"recv({buf},{count},{dtype},peer={peer},stream={stream})")

        def reduceScatter(self, send, recv, count, dtype, op, stream):
            rec.log.append(f"reduceScatter({send},{recv},{count},{dtype},{op},stream={stream})")

    g.communicator = Communicator()
    return g, rec


def test_nccl_all_reduce_runs_on_the_side_stream_after_the_current_streams_work():
    g, rec = _fake_group()
    work = g.all_reduce(_FakeArray("float32", 10), "avg")
    assert rec.log == [
        "event1.record(current)",      # what backward queued so far ...
        "side.wait(event1)",           # ... is finished before NCCL reads the buffer
        "allReduce(1234,1234,10,NCCL_FLOAT32,NCCL_AVG,stream=77)",  # NCCL divides
        "event2.record(side)",
    ]
    rec.log.clear()
    work.wait()  # the current stream (the optimizer) waits for the result; the host does not
    assert rec.log == ["current.wait(event2)"]


def test_nccl_avg_without_ncclavg_sums_then_divides_on_the_side_stream():
    g, rec = _fake_group()
    real_getattr = type(rec).__getattr__
    type(rec).__getattr__ = lambda self, name: (  # an NCCL older than 2.10: no NCCL_AVG
        (_ for _ in ()).throw(AttributeError(name)) if name == "NCCL_AVG"
        else real_getattr(self, name))
    try:
        g.all_reduce(_FakeArray("float32", 10), "avg")
    finally:
        type(rec).__getattr__ = real_getattr
    assert rec.log[2:] == [
        "allReduce(1234,1234,10,NCCL_FLOAT32,NCCL_SUM,stream=77)",
        "enter side", "divide by 2", "exit side", "event2.record(side)"]


def test_nccl_broadcast_and_the_op_and_dtype_names():
    g, rec = _fake_group()
    g.broadcast(_FakeArray("int64", 3), src=1)
    assert rec.log[2] == "bcast(1234,3,NCCL_INT64,root=1,stream=77)"
    for op, name in [("sum", "NCCL_SUM"), ("max", "NCCL_MAX"), ("min", "NCCL_MIN"),
                     ("product", "NCCL_PROD")]:
        rec.log.clear()
        g.all_reduce(_FakeArray("float16", 1), op)
        assert f"NCCL_FLOAT16,{name}" in rec.log[2] and "divide" not in " ".join(rec.log)
    # every dtype the public API lets through has an NCCL name of the same width
    from tinytrain.distributed.process_group import OPS, MPIGroup

    assert set(_DTYPES) == set(MPIGroup.dtypes)
    assert set(_OPS) == set(OPS) - {"band", "bor", "bxor"}  # (NCCL has no bitwise ops)
    for dtype, name in _DTYPES.items():
        bits = {"NCCL_FLOAT16": 16, "NCCL_FLOAT32": 32, "NCCL_FLOAT64": 64, "NCCL_INT8": 8,
                "NCCL_UINT8": 8, "NCCL_INT32": 32, "NCCL_INT64": 64}[name]
        assert np.dtype(dtype).itemsize * 8 == bits and name.endswith(str(bits))


def test_nccl_all_gather_and_reduce_run_on_the_side_stream_and_count():
    g, rec = _fake_group(world_size=3, rank=1)
    g.collectives = 0
    g.all_gather(_FakeArray("float32", 5), _FakeArray("float32", 15, ptr=5000))
    assert rec.log == ["event1.record(current)", "side.wait(event1)",
                       "allGather(1234,5000,5,NCCL_FLOAT32,stream=77)", "event2.record(side)"]
    rec.log.clear()
    g.reduce(_FakeArray("int64", 4), 2, "product")
    assert rec.log[2:] == ["reduce(1234,1234,4,NCCL_INT64,NCCL_PROD,root=2,stream=77)",
                           "event4.record(side)"]
    assert g.collectives == 2  # the call checks compare these counts


def test_nccl_gather_and_scatter_are_grouped_sends_and_receives_the_root_copies_its_own():
    """Rank 1 of 3 is the root: it receives ranks 0 and 2's parts (of 8 bytes each) at
    their offsets in the stacked buffer and copies its own, all on the side stream."""
    root, rec = _fake_group(world_size=3, rank=1)
    root.gather(_FakeArray("float64", 1), _FakeArray("float64", 3, ptr=5000), dst=1)
    assert rec.log[2:] == ["groupStart", "recv(5000,1,NCCL_FLOAT64,peer=0,stream=77)",
                           "recv(5016,1,NCCL_FLOAT64,peer=2,stream=77)", "groupEnd",
                           "copy(5008,1234,8,DtoD,stream=77)", "event2.record(side)"]
    other, rec = _fake_group(world_size=3, rank=2)
    other.gather(_FakeArray("float64", 1), None, dst=1)
    assert rec.log[2:] == ["groupStart", "send(1234,1,NCCL_FLOAT64,peer=1,stream=77)",
                           "groupEnd", "event2.record(side)"]
    root, rec = _fake_group(world_size=3, rank=1)
    root.scatter(_FakeArray("int32", 6, ptr=5000), _FakeArray("int32", 2), src=1)
    assert rec.log[2:] == ["groupStart", "send(5000,2,NCCL_INT32,peer=0,stream=77)",
                           "send(5016,2,NCCL_INT32,peer=2,stream=77)", "groupEnd",
                           "copy(1234,5008,8,DtoD,stream=77)", "event2.record(side)"]
    other, rec = _fake_group(world_size=3, rank=0)
    other.scatter(None, _FakeArray("int32", 2), src=1)
    assert rec.log[2:] == ["groupStart", "recv(1234,2,NCCL_INT32,peer=1,stream=77)",
                           "groupEnd", "event2.record(side)"]


def test_nccl_work_keeps_its_arrays_until_the_current_stream_waits_for_it():
    """A temporary's memory goes back to CuPy's pool, for the current stream's next array,
    while NCCL may still write into it on the side stream: the Work holds it until
    wait()."""
    import gc
    import weakref

    g, rec = _fake_group()
    array = _FakeArray("float32", 10)
    alive = weakref.ref(array)
    work = g.all_reduce(array, "sum")
    del array
    gc.collect()
    assert alive() is not None and g.in_flight == [work]
    assert work.wait() is True  # as PyTorch's
    gc.collect()
    assert alive() is None and g.in_flight == []


def test_nccl_send_recv_reduce_scatter_and_all_to_all_on_the_side_stream():
    g, rec = _fake_group(world_size=2, rank=0)
    work = g.send(_FakeArray("float32", 4), dst=1)
    assert rec.log == ["event1.record(current)", "side.wait(event1)", "groupStart",
                       "send(1234,4,NCCL_FLOAT32,peer=1,stream=77)", "groupEnd",
                       "event2.record(side)"]
    assert not work.ordered  # (a receive's wait does not wait for earlier collectives)
    with pytest.raises(NotImplementedError, match="NCCL receives from a given rank only"):
        g.recv(_FakeArray("float32", 4), None)
    rec.log.clear()
    g.reduce_scatter(_FakeArray("int32", 6), _FakeArray("int32", 3, ptr=5000), "max")
    assert rec.log[2:] == ["reduceScatter(1234,5000,3,NCCL_INT32,NCCL_MAX,stream=77)",
                           "event4.record(side)"]
    rec.log.clear()  # rank 0 sends 2 and 3 elements, receives 1 and 3 (float32: 4 bytes)
    g.all_to_all(_FakeArray("float32", 5, ptr=1000), _FakeArray("float32", 4, ptr=2000),
                 [2, 3], [1, 3])
    assert rec.log[2:] == ["groupStart", "send(1000,2,NCCL_FLOAT32,peer=0,stream=77)",
                           "recv(2000,1,NCCL_FLOAT32,peer=0,stream=77)",
                           "send(1008,3,NCCL_FLOAT32,peer=1,stream=77)",
                           "recv(2004,3,NCCL_FLOAT32,peer=1,stream=77)", "groupEnd",
                           "event6.record(side)"]


def test_nccl_batch_isend_irecv_is_one_group_with_one_event_after_it():
    """NCCL queues a group's sends and receives at its groupEnd: an event recorded before
    would complete at once, so the batch's Works share one recorded after it."""
    g, rec = _fake_group(world_size=2, rank=1)
    with g.batch():
        sent = g.send(_FakeArray("float32", 2), dst=0)
        received = g.recv(_FakeArray("float32", 2, ptr=5000), src=0)
    assert [line for line in rec.log if "group" in line or "record(side)" in line] == [
        "groupStart", "groupStart", "groupEnd", "groupStart", "groupEnd", "groupEnd",
        "event3.record(side)"]
    assert sent.done is received.done and received.source == 0
    rec.log.clear()
    received.wait()
    assert rec.log == ["current.wait(event3)"]


# ------------------------------------------------------------------ launcher


def test_launched_world_size_reads_the_launchers_environment(monkeypatch):
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert launch.launched_world_size() == 1
    monkeypatch.setenv("PMI_SIZE", "4")
    assert launch.launched_world_size() == 4


def test_each_rank_gets_its_share_of_the_threads_unless_the_user_chose(monkeypatch, tmp_path):
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TINYTRAIN_MPIEXEC", str(fake))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    cmd = launch.mpiexec_command(2, ["-m", "tinytrain.train"])
    assert cmd[:3] == [str(fake), "-n", "2"] and cmd[-2:] == ["-m", "tinytrain.train"]
    env = launch.rank_environment(4)
    assert env["OMP_NUM_THREADS"] == "4" and env["MKL_NUM_THREADS"] == "3"  # the user's wins


def test_missing_mpiexec_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("TINYTRAIN_MPIEXEC", str(tmp_path / "nothing"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(launch.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(FileNotFoundError, match="pip install mpi4py mpich"):
        launch.find_mpiexec()


def test_pytorch_names_tinytrain_lacks_say_what_it_has():
    import tinytrain.distributed as dist

    for name in ("anything_else", "all_reduce_coalesced"):
        with pytest.raises(AttributeError, match="has all_reduce, reduce, broadcast, all_gather"):
            getattr(dist, name)
    with pytest.raises(AttributeError, match="new_group"):
        _ = dist.get_process_group


def test_backend_names_availability_and_p2p_ops_as_pytorchs():
    """Names only (no group): PyTorch's Backend strings, case-insensitive; the bitwise ops;
    P2POp and batch_isend_irecv refuse what PyTorch refuses."""
    import torch.distributed as tdist

    import tinytrain.distributed as dist

    for name in ("gloo", "GLOO", "Nccl", "mpi"):
        assert dist.Backend(name) == tdist.Backend(name) and type(dist.Backend(name)) is str
    assert (dist.Backend.GLOO, dist.Backend.NCCL, dist.Backend.MPI) == ("gloo", "nccl", "mpi")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        dist.Backend("tpu")
    assert dist.is_gloo_available() == dist.is_mpi_available() == dist.is_available()
    assert isinstance(dist.is_nccl_available(), bool)
    assert [dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR] == ["band", "bor", "bxor"]
    with pytest.raises(ValueError, match="Invalid ``op``"):
        dist.P2POp(dist.all_reduce, tt.ones(1), 0)
    for bad in ([], [dist.isend]):
        with pytest.raises(ValueError, match="Invalid ``p2p_op_list``"):
            dist.batch_isend_irecv(bad)


def test_a_thread_count_the_program_chose_survives_init_process_group(tmp_path):
    """A group of one (no mpiexec) in a fresh process: the default share of the cores is
    not applied over the program's own tt.set_num_threads."""
    script = tmp_path / "threads.py"
    script.write_text("import tinytrain as tt, tinytrain.distributed as dist\n"
                      "tt.set_num_threads(1)\n"
                      "dist.init_process_group('mpi')\n"
                      "print('threads', tt.get_num_threads())\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=env)
    if "needs MPI" in r.stderr:
        pytest.skip("mpi4py is not installed")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "threads 1" in r.stdout


def test_gathered_object_sizes_that_are_not_a_checks_are_refused_before_allocating():
    """allgather_object's sizes come from MPI: bytes of another call (a float gradient read
    as int32) must be a clear error, not numpy's 'negative dimensions' or a huge buffer."""
    from tinytrain.distributed.process_group import MAX_OBJECT_BYTES, _check_object_sizes

    _check_object_sizes(np.array([40, MAX_OBJECT_BYTES], np.int32), "check on rank 0")
    for bad, rank in (([40, -1082130432], 1), ([0, 40], 0), ([40, MAX_OBJECT_BYTES + 1], 1)):
        with pytest.raises(RuntimeError, match=rf"check on rank 0: rank {rank} sent a size of "
                                               r".* the ranks' calls on the check communicator "
                                               "do not match"):
            _check_object_sizes(np.array(bad, np.int32), "check on rank 0")


@pytest.mark.parametrize("how", ["child", "fork"])
def test_a_process_started_by_a_rank_is_not_a_rank_and_fails_on_its_own(how, tmp_path):
    """A helper a rank runs (os.system, a forked worker) inherits the launcher's PMI_RANK:
    it joined MPI's start-up to abort the job when it raised (exit 15 and a PMI dump, or the
    whole job killed); it must fail as a plain Python process does, at once, with exit 1."""
    script = tmp_path / "helper.py"
    script.write_text(
        "import os, sys\n"
        "import tinytrain.distributed\n"
        "if os.environ['HOW'] == 'fork' and os.fork():  # the rank: wait for its fork\n"
        "    sys.exit(os.waitstatus_to_exitcode(os.wait()[1]))\n"
        "raise ValueError('helper failed')\n")
    env = {**os.environ, "PMI_RANK": "0", "PMI_SIZE": "2", "HOW": how,
           "PYTHONPATH": str(Path(tt.__file__).parent.parent)}
    env.pop("TINYTRAIN_RANK_PID", None)
    if how == "child":
        env["TINYTRAIN_RANK_PID"] = "1"  # set by the rank that started it (not this pid)
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "ValueError: helper failed" in result.stderr
    assert "PMI" not in result.stderr and "Abort" not in result.stderr, result.stderr


# ------------------------------------------------------------------ PyTorch's names


def test_names_hpc_scripts_use_before_init_answer_as_torchs():
    import torch.distributed as tdist

    import tinytrain.distributed as dist

    assert dist.group.WORLD is tdist.group.WORLD is None
    assert dist.GroupMember.WORLD is tdist.GroupMember.WORLD is None
    assert dist.GroupMember.NON_GROUP_MEMBER == tdist.GroupMember.NON_GROUP_MEMBER
    with pytest.raises(ValueError) as theirs:
        tdist.get_world_size()
    for kind in (ValueError, RuntimeError):  # PyTorch's, and what tinytrain raised
        with pytest.raises(kind) as mine:
            dist.get_world_size()
        assert str(theirs.value) in str(mine.value)
    assert dist.is_torchelastic_launched() is tdist.is_torchelastic_launched() is False
    os.environ.pop("LOCAL_RANK", None)
    assert dist.get_node_local_rank(3) == tdist.get_node_local_rank(3) == 3
    with pytest.raises(RuntimeError, match="LOCAL_RANK is not in the environment"):
        dist.get_node_local_rank()
    os.environ["LOCAL_RANK"] = "1"
    try:
        assert dist.get_node_local_rank(3) == tdist.get_node_local_rank(3) == 1
    finally:
        del os.environ["LOCAL_RANK"]


def test_utils_data_distributed_needs_no_import_of_its_own():
    code = ("import tinytrain.utils.data as d\n"
            "from tinytrain.data import DistributedSampler\n"
            "assert d.distributed.DistributedSampler is DistributedSampler\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.skipif(tt.cuda.is_available(), reason="the CPU-only answers")
def test_cuda_memory_functions_without_a_gpu_answer_as_torchs_cpu_build():
    import torch

    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "empty_cache"):
        assert getattr(tt.cuda, name)() == getattr(torch.cuda, name)(), name
    for name in ("get_device_name", "reset_peak_memory_stats"):
        with pytest.raises((AssertionError, AttributeError)):  # torch's CPU build
            getattr(torch.cuda, name)()
        with pytest.raises(RuntimeError, match="needs CuPy and an NVIDIA GPU"):
            getattr(tt.cuda, name)()


@pytest.mark.cuda
@pytest.mark.skipif(not tt.cuda_is_available(), reason="needs CuPy and an NVIDIA GPU")
def test_cuda_memory_functions_report_cupys_pool():
    import cupy

    tt.cuda.empty_cache()
    tt.cuda.reset_peak_memory_stats()
    base = tt.cuda.memory_allocated()
    assert base == cupy.get_default_memory_pool().used_bytes()
    x = tt.zeros(1 << 20, device="cuda")  # 4 MiB
    assert tt.cuda.memory_allocated() == base + 4 * 2**20
    assert tt.cuda.memory_reserved() >= tt.cuda.memory_allocated()
    del x
    assert tt.cuda.memory_allocated() == base
    assert tt.cuda.max_memory_allocated() >= base + 4 * 2**20
    held = tt.cuda.memory_reserved()
    tt.cuda.empty_cache()  # (x's 4 MiB go back; a block that a live array shares stays held)
    assert tt.cuda.memory_allocated() <= tt.cuda.memory_reserved() <= held - 4 * 2**20
    tt.cuda.reset_peak_memory_stats()
    assert tt.cuda.max_memory_allocated() == base
    assert tt.cuda.get_device_name() == tt.cuda.get_device_name(0) and tt.cuda.get_device_name()
