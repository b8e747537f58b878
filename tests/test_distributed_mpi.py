"""tinytrain.distributed with real processes: ``mpiexec -n 2`` runs tests/mpi_worker.py (or the
training command) and the test reads the exit code and the output.

Every run has a timeout, so a hang fails the test instead of blocking CI. The ``nccl`` cases
carry the ``cuda`` marker and need two GPUs; without mpi4py or mpiexec everything here skips
and says why.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tinytrain as tt

ROOT = Path(__file__).resolve().parent.parent
WORKER = str(ROOT / "tests" / "mpi_worker.py")


def _mpiexec() -> str:
    try:
        import mpi4py  # noqa: F401

        from tinytrain.distributed.launch import find_mpiexec

        return find_mpiexec()
    except (ImportError, FileNotFoundError) as exc:
        pytest.skip(f"needs MPI (pip install mpi4py mpich): {exc}")


def _two_gpus() -> bool:
    if not tt.cuda_is_available():
        return False
    import cupy

    return cupy.cuda.runtime.getDeviceCount() >= 2


BACKENDS = [pytest.param("mpi", id="mpi"),
            pytest.param("nccl", id="nccl", marks=pytest.mark.cuda)]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    if request.param == "nccl" and not _two_gpus():
        pytest.skip("the nccl backend needs CuPy, NCCL and two GPUs")
    return request.param


def _env() -> dict[str, str]:
    # Open MPI refuses to start as root without these (containers and the GPU machines run
    # as root); MPICH ignores them.
    return {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def mpirun(*args: str, n: int = 2, timeout: float = 120,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``mpiexec -n N python ARGS``; a run that outlives ``timeout`` fails the test."""
    cmd = [_mpiexec(), "-n", str(n), sys.executable, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**_env(), **(env or {})}, cwd=ROOT)


def _ok(r: subprocess.CompletedProcess, scenario: str, n: int = 2) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in range(n):
        assert f"ok {scenario} rank {rank}" in r.stdout, r.stdout


# ------------------------------------------------------------------ collectives and DDP


def test_collectives_sum_avg_max_min_product_broadcast_dtypes_shapes_async(backend):
    _ok(mpirun(WORKER, "collectives", "--backend", backend), "collectives")


@pytest.mark.parametrize("n", [2, 3])
def test_all_gather_gather_scatter_reduce_product_and_objects_on_2_and_3_ranks(backend, n):
    """Every value against what each rank contributed, float32/float64/int64/bool, odd
    shapes, sync and async; the errors of a bad call name the rank and the shapes."""
    if backend == "nccl" and n > 2 and tt.cuda_is_available():
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < n:
            pytest.skip(f"needs {n} GPUs")
    _ok(mpirun(WORKER, "gather_collectives", "--backend", backend, n=n),
        "gather_collectives", n=n)


def test_bucket_order_sizes_views_and_an_all_reduce_before_backward_ends(backend):
    _ok(mpirun(WORKER, "ddp_buckets", "--backend", backend), "ddp_buckets")


def test_no_sync_accumulation_and_find_unused_parameters(backend):
    _ok(mpirun(WORKER, "ddp_features", "--backend", backend), "ddp_features")


def test_a_model_wrapped_again_trains_with_the_wrapper_used_last(backend):
    n = 3 if backend == "mpi" else 2  # (one GPU per rank)
    _ok(mpirun(WORKER, "ddp_rewrap", "--backend", backend, n=n), "ddp_rewrap", n=n)


def test_buffers_are_copied_from_rank_0_before_a_forward_as_in_pytorch(backend):
    _ok(mpirun(WORKER, "ddp_buffers", "--backend", backend), "ddp_buffers")


@pytest.mark.parametrize("flags", [[], ["broadcast_buffers=False"],
                                   ["forward_sync_buffers=False"]])
def test_buffers_unused_parameters_and_gradients_match_pytorch_ddp(tmp_path, flags):
    """tests/ddp_vs_torch.py with each library on two ranks (PyTorch over gloo): every
    gradient of three SGD steps (momentum, weight decay), which parameters keep no .grad,
    the BatchNorm's running statistics, the weights and an evaluation agree on each rank."""
    torch = pytest.importorskip("torch")
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.skip("this PyTorch has no gloo backend")
    script = str(ROOT / "tests" / "ddp_vs_torch.py")
    for library in ("torch", "tinytrain"):
        r = mpirun(script, library, str(tmp_path / library), *flags)
        assert r.returncode == 0, library + ": " + r.stdout[-2000:] + r.stderr[-2000:]
    for rank in range(2):
        ours = np.load(tmp_path / f"tinytrain.rank{rank}.npz")
        theirs = np.load(tmp_path / f"torch.rank{rank}.npz")
        assert sorted(ours) == sorted(theirs)
        assert list(ours["step0.no_grad"]) == ["unused.bias", "unused.weight"]
        for key in theirs:  # gradients up to ~30; body.bias's is 0 up to ~1e-6 rounding
            if theirs[key].dtype.kind in "fiu":  # (the BatchNorm after it takes out the mean)
                np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-4,
                                           err_msg=f"rank {rank}: {key}")
            else:
                np.testing.assert_array_equal(ours[key], theirs[key], f"rank {rank}: {key}")


def test_two_ranks_of_batch_32_equal_one_process_of_batch_64(tmp_path):
    """10 SGD steps in float64: the data-parallel run is the big-batch run, to rounding; and
    the two ranks end bit-identical."""
    demo = ["-m", "tinytrain.distributed.demo", "--steps", "10"]
    two = mpirun(*demo, "--batch-size", "32", "--save", str(tmp_path / "two.npz"))
    assert two.returncode == 0, two.stderr
    one = subprocess.run([sys.executable, *demo, "--batch-size", "64", "--save",
                          str(tmp_path / "one.npz")], capture_output=True, text=True,
                         timeout=120, env=_env(), cwd=ROOT)
    assert one.returncode == 0, one.stderr
    a, b = tt.load(tmp_path / "two.npz"), tt.load(tmp_path / "one.npz")
    assert a.keys() == b.keys() and a["fc1.weight"].dtype == np.float64
    from tinytrain.models import build_model

    tt.manual_seed(0)  # the demo's seed: its initial weights
    fresh = build_model("mlp").to(dtype="float64").state_dict()
    for k in a:
        np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), rtol=0, atol=1e-9, err_msg=k)
        assert np.abs(a[k].numpy() - fresh[k].numpy()).max() > 1e-4, f"{k} did not train"
    digests = {line.split("parameters ")[1].split()[0]
               for line in two.stdout.splitlines() if "parameters" in line}
    assert len(digests) == 1 and two.stdout.count("parameters") == 2, two.stdout


def test_a_script_written_as_for_pytorch_ddp_trains_on_two_ranks(tmp_path):
    """tests/ddp_pytorch_style.py: PyTorch's import paths, ReduceOp, device_ids, a sampler
    with set_epoch; the loss falls, every sample is seen once an epoch, the ranks end
    bit-identical and rank 0's checkpoint holds their weights."""
    r = mpirun(str(ROOT / "tests" / "ddp_pytorch_style.py"), str(tmp_path / "model.npz"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"mean loss ([\d.]+) over 256 samples", r.stdout)]
    assert len(losses) == 4 and losses[-1] < 0.8 * losses[0], r.stdout
    assert r.stdout.count("device_ids refused on the CPU") == 2, r.stdout
    digests = set(re.findall(r"rank \d: parameters (\w+)", r.stdout))
    assert len(digests) == 1 and r.stdout.count(": parameters") == 2, r.stdout
    state = tt.load(tmp_path / "model.npz")
    assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_sharded_evaluation_counts_equal_one_process_exactly():
    _ok(mpirun(WORKER, "sharded_evaluation"), "sharded_evaluation")


# ------------------------------------------------------------------ bugs caught, not hung


@pytest.mark.parametrize("scenario,message,reached", [
    ("zero_grad_after_forward", "zero_grad(set_to_none=True) between forward and backward",
     "first step ok"),
    ("forward_bypassed", "this backward follows no forward of the DDP wrapper since the "
                         "last backward, so either the model was called directly "
                         "(ddp.module(x) or model.forward(x) instead of ddp(x))", "first step ok"),
    ("unused_parameter", "received no gradient in this step: b.bias, b.weight", None),
    ("diverged", "after 2 training steps the ranks hold different values of layers.2.bias",
     None),
    ("dtype_after_wrap", "parameter layers.4.bias is float64 on cpu, but its gradient bucket "
                         "was made float32 on cpu when the model was wrapped", None),
    ("frozen_on_one_rank", "the ranks built different models", None),
    ("mismatched_all_reduce", "rank 0: all_reduce(op='sum') of float32 [4]; rank 1: "
                              "all_reduce(op='sum') of float32 [6]", None),
    ("mismatched_op", "the ranks made different collective calls", None),
    ("barrier_against_all_reduce", "rank 0: barrier(); rank 1: all_reduce(op='sum') of "
                                   "float32 [4]", None),
    ("mismatched_all_gather", "rank 0: all_gather of float32 [4]; rank 1: all_gather of "
                              "float32 [6]", None),
    ("gather_against_all_gather_object", "rank 0: gather(dst=0) of float32 [3]; rank 1: "
                                         "all_gather_object()", None),
    ("reduce_queued_on_one_rank", "broadcast_object_list(src=0) of 1 objects (rank 0 of 2): "
                                  "the ranks have made different numbers of collective calls "
                                  "before this one (rank 0: 1, rank 1: 0", None),
])
def test_bugs_that_would_make_ranks_diverge_raise_a_clear_error(scenario, message, reached):
    r = mpirun(WORKER, scenario, timeout=60)
    assert r.returncode != 0
    assert "went unnoticed" not in r.stdout
    assert message in r.stderr, r.stderr[-3000:]
    assert "rank 0 of 2" in r.stderr or "rank 1 of 2" in r.stderr
    if reached:
        assert reached in r.stdout


def test_pytorchs_init_arguments_are_accepted_when_they_agree_with_mpiexec():
    r = mpirun(WORKER, "init_arguments", timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("ok init_arguments") == 2


def test_training_with_the_wrapper_in_eval_mode_averages_the_gradients():
    r = mpirun(WORKER, "eval_mode_training", timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("ok eval_mode_training") == 2


def _start(*args: str, new_session: bool = False) -> tuple[subprocess.Popen, dict[int, int]]:
    """Start ``mpiexec -n 2 python ARGS``; return it and {rank: pid} once both are ready."""
    p = subprocess.Popen([_mpiexec(), "-n", "2", sys.executable, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=_env(), cwd=ROOT,
                         start_new_session=new_session)
    watchdog = threading.Timer(60, p.kill)  # never let a broken test hang
    watchdog.start()
    pids: dict[int, int] = {}
    seen = ""
    try:
        while len(pids) < 2:  # the ranks' lines may arrive merged: match the whole output
            line = p.stdout.readline()
            assert line, f"the ranks exited before they were ready: {seen}"
            seen += line
            pids = {int(r): int(pid) for r, pid in re.findall(r"ready rank (\d+) pid (\d+)", seen)}
    finally:
        watchdog.cancel()
    return p, pids


def _finish_within(p: subprocess.Popen, seconds: float) -> tuple[int, float, str]:
    t0 = time.perf_counter()
    try:
        out, _ = p.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"the job was still running {seconds} s later")
    return p.returncode, time.perf_counter() - t0, out


def _all_gone(pids: dict[int, int], seconds: float) -> bool:
    """True once no rank process exists (or is a zombie), polling for ``seconds``."""
    def gone(pid: int) -> bool:
        try:
            return "zombie" in Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True

    deadline = time.perf_counter() + seconds
    while not all(gone(pid) for pid in pids.values()):
        if time.perf_counter() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_rank_that_raises_stops_every_rank_within_30_s():
    t0 = time.perf_counter()
    r = mpirun(WORKER, "raise_on_one_rank", timeout=60)
    assert r.returncode != 0 and time.perf_counter() - t0 < 30
    assert "rank 1 fails on purpose" in r.stderr and "rank 0 was not stopped" not in r.stdout


def test_a_rank_killed_with_sigkill_stops_every_rank_within_30_s():
    p, pids = _start(WORKER, "wait_forever")
    os.kill(pids[1], signal.SIGKILL)
    code, seconds, _ = _finish_within(p, 30)
    assert code != 0 and _all_gone(pids, 30 - seconds)


def test_a_rank_that_left_is_an_error_soon_after_not_after_the_timeout():
    """Rank 1 leaves (destroy_process_group) without the all-reduce rank 0 waits in: rank 0
    hears of it and raises within LEAVE_GRACE (3 s), not after the 60 s timeout (before,
    it waited for the timeout, 30 minutes by default), naming the rank that left, the
    collective and the likely cause; every rank stops."""
    t0 = time.monotonic()
    r = mpirun(WORKER, "skip_collective", "--timeout", "60", timeout=50)
    assert r.returncode != 0
    assert "waiting rank 0" in r.stdout and "not reached" not in r.stdout
    assert re.search(r"PeerLeft: all_reduce\(op='sum'\) of float32 \[10\] on rank 0 of 2 "
                     r"\(mpi backend\) cannot complete: rank 1 left the group",
                     r.stderr), r.stderr[-2000:]
    assert "rank 1 left the group (it called destroy_process_group())" in r.stderr
    assert "Likely cause: the ranks ran different numbers of steps or batches" in r.stderr
    assert "or a forward of the DistributedDataParallel wrapper on some ranks only" in r.stderr
    assert time.monotonic() - t0 < 30


def test_ranks_that_left_are_named_in_a_sentence():
    """Two ranks that left: "ranks 1 and 2 left the group (they called ...)", not "rank 1, 2
    left the group (it called ...)"."""
    r = mpirun(WORKER, "skip_collective", "--timeout", "60", n=3, timeout=50)
    assert r.returncode != 0
    assert "ranks 1 and 2 left the group (they called destroy_process_group()) while this " \
           "rank waits for them here" in r.stderr, r.stderr[-2000:]


def test_a_rank_that_exits_on_purpose_is_not_blamed_on_uneven_batches():
    """Rank 1 calls sys.exit(3) at its third step (PyTorch's torchrun names it, exit code 3):
    rank 0's error says that rank 1's program ended; it used to give uneven batches as the
    likely cause. (Python tells nothing of the exit code to the code that runs at exit.)"""
    r = mpirun(WORKER, "exit_mid_training", "--timeout", "60", timeout=50)
    assert r.returncode != 0
    assert re.search(r"all_reduce\(op='avg'\) of float32 \[55\] on rank 0 of 2 \(mpi backend\) "
                     r"cannot complete: rank 1 left the group \(its program ended without "
                     r"destroy_process_group\(\): at its last line, sys.exit\(\) or exit\(\)\)",
                     r.stderr), r.stderr[-2000:]
    assert "If rank 1 stopped on purpose or on an error, its own output says why" in r.stderr
    assert "Likely cause" not in r.stderr


def test_a_backward_whose_peer_left_fails_once_and_says_it_was_ddp():
    """Rank 1 exits (the group is left at exit) after one step: rank 0's next backward fails
    soon after, once (not once per bucket), and says it was averaging gradients."""
    r = mpirun(WORKER, "ddp_peer_gone", "--timeout", "60", timeout=50)
    assert r.returncode != 0
    start = float(re.search(r"backward without rank 1 at ([\d.]+)", r.stdout).group(1))
    assert time.monotonic() - start < 20, "waited for the timeout"
    assert re.search(r"DistributedDataParallel \(rank 0 of 2\), averaging the gradients at "
                     r"the end of backward: all_reduce\(op='avg'\) of float32 \[\d+\] on "
                     r"rank 0 of 2 \(mpi backend\) cannot complete: rank 1 left the group",
                     r.stderr), r.stderr[-2000:]
    assert r.stderr.count("cannot complete") == 1, r.stderr[-3000:]


def test_a_rank_waiting_long_in_a_collective_says_so_once_and_finishes():
    r = mpirun(WORKER, "stall_notice", "--timeout", "60", timeout=50)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "rank 0 done: [2.0, 2.0, 2.0]" in r.stdout and "rank 1 done" in r.stdout
    assert r.stderr.count("has waited 1 s in all_reduce(op='sum') of float32 [3]") == 1, \
        r.stderr[-2000:]


def test_a_rank_with_a_collective_more_is_named_at_the_next_call_check():
    """Under NCCL a rank one batch ahead reaches the epoch's all_reduce while its last bucket
    all-reduce is still queued on the GPU, and NCCL would pair the two (a metric summed with
    gradients, silently). The call check compares how many collectives each rank started."""
    r = mpirun(WORKER, "collective_queued_on_one_rank", "--timeout", "60", timeout=50)
    assert r.returncode != 0
    assert "went unnoticed" not in r.stdout, r.stdout
    assert re.search(r"the ranks have made different numbers of collective calls before this "
                     r"one \(rank 0: 1, rank 1: 0", r.stderr), r.stderr[-2000:]
    assert "DistributedSampler" in r.stderr
    assert "or a forward of the DistributedDataParallel wrapper on some ranks only" in r.stderr


@pytest.mark.parametrize("scenario,where", [
    ("ddp_forward_on_one_rank", "destroy_process_group()"),
    ("ddp_forward_on_one_rank_no_destroy",
     "at exit (the program ended without destroy_process_group())")])
def test_a_ddp_forward_on_rank_0_only_fails_when_the_group_is_left_not_silently(scenario,
                                                                                 where):
    """`if rank == 0: ddp.eval(); ddp(x)` with BatchNorm: rank 0's buffer broadcast
    completed alone, and the ranks' buffers ended different with exit code 0 (PyTorch's gloo
    waits for the missing broadcast until its timeout). The leaving notices carry each
    rank's count of collectives: every rank raises, naming the counts and the cause."""
    r = mpirun(WORKER, scenario, "--timeout", "60", timeout=60)
    assert r.returncode != 0, r.stdout + r.stderr[-2000:]
    assert "trained rank 0" in r.stdout and "trained rank 1" in r.stdout
    for rank in (0, 1):
        assert re.search(rf"UnevenCollectives: {re.escape(where)} on rank {rank} of 2: the "
                         r"ranks made different numbers of collective calls \(rank 0: (\d+), "
                         r"rank 1: (\d+);", r.stderr), r.stderr[-3000:]
    assert "a forward of the DistributedDataParallel wrapper on some ranks only" in r.stderr
    assert "evaluate on one rank with ddp.module(x)" in r.stderr


def test_uneven_batches_then_an_all_reduce_time_out_clearly_instead_of_mismatching():
    """Rank 0 is in a DDP bucket's all-reduce when rank 1 makes the epoch's all_reduce: the
    call check of rank 1 used to be matched with the bucket (float bits read as sizes:
    'negative dimensions are not allowed', or a silent match). Checks now have their own
    communicator: both ranks wait and time out, saying what is the likely cause."""
    t0 = time.monotonic()
    r = mpirun(WORKER, "uneven_then_all_reduce", "--timeout", "3", timeout=50)
    assert r.returncode != 0
    assert "went unnoticed" not in r.stdout and "rank 1 at the epoch's all_reduce" in r.stdout
    assert "negative dimensions" not in r.stderr, r.stderr[-2000:]
    assert re.search(r"CollectiveTimeout: (DistributedDataParallel \(rank 0 of 2\), averaging "
                     r"the gradients|all_reduce\(op='sum'\) of float32 \[2\] on rank 1 of 2)",
                     r.stderr), r.stderr[-2000:]
    assert "it ran a different number of batches" in r.stderr
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("timeout", ["60", "2"])
def test_a_rank_that_works_alone_before_it_exits_is_no_error(timeout):
    """Rank 0 writes a checkpoint (sleeps) after the last collective while rank 1 leaves:
    rank 1 waits for it at the end (at most the timeout: with 2 s it stops waiting), and
    neither reports an error."""
    _ok(mpirun(WORKER, "work_alone_before_exit", "--timeout", timeout, timeout=50),
        "work_alone_before_exit")


def test_a_rank_refused_at_init_does_not_wait_for_the_others_to_leave():
    """Rank 1 passes a rank that contradicts mpiexec: its group is freed without the
    end-of-group rendezvous (rank 0 stays in the group), so the error stops the job at once,
    not after the 60 s timeout."""
    code = ("import time\n"
            "import tinytrain.distributed as dist\n"
            "dist.init_process_group('mpi', rank=0, timeout=60)\n"
            "time.sleep(60)\n")
    t0 = time.monotonic()
    r = mpirun("-c", code, timeout=50)
    assert r.returncode != 0
    assert "rank=0 was passed, but mpiexec started this process as rank 1" in r.stderr
    assert time.monotonic() - t0 < 30


def test_pytorch_spellings_on_a_group_of_one():
    """'gloo' is the mpi backend; DDP takes bucket_cap_mb=None (25 MiB),
    gradient_as_bucket_view and static_graph, and refuses a model with nothing to train in
    PyTorch's words; ReduceOp.PREMUL_SUM says what there is; a group of one has no leaving notices
    to wait for."""
    _mpiexec()  # skip without MPI
    code = ("import tinytrain as tt, tinytrain.distributed as dist\n"
            "g = dist.init_process_group('GLOO')\n"
            "assert dist.get_backend() == 'mpi' and g.departures is None\n"
            "model = tt.nn.Sequential(*[tt.nn.Linear(1024, 1024) for _ in range(8)])\n"
            "ddp = dist.DistributedDataParallel(model, bucket_cap_mb=None,\n"
            "                                   gradient_as_bucket_view=True, static_graph=True)\n"
            "assert [round(b.nbytes / 2**20) for b in ddp.buckets] == [4, 28], ddp\n"
            "try:\n"
            "    dist.ReduceOp.PREMUL_SUM\n"
            "except AttributeError as e:\n"
            "    print('refused:', e)\n"
            "frozen = tt.nn.Linear(3, 2).requires_grad_(False)\n"
            "try:\n"
            "    dist.DistributedDataParallel(frozen)\n"
            "except RuntimeError as e:\n"
            "    print('frozen:', e)\n"
            "dist.destroy_process_group()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused: type object 'ReduceOp' has no attribute 'PREMUL_SUM': tinytrain reduces " \
           "with SUM, AVG, MAX, MIN, PRODUCT, and BAND, BOR and BXOR" in r.stdout, r.stdout
    assert "frozen: DistributedDataParallel (rank 0 of 1): DistributedDataParallel is not " \
           "needed when a module doesn't have any parameter that requires a gradient." \
           in r.stdout, r.stdout  # PyTorch's message


@pytest.mark.cuda
def test_the_nccl_backend_on_a_group_of_one_with_and_without_device_id():
    """The nccl backend starts on one GPU with device_id left out (it raised
    UnboundLocalError), with device_id naming this rank's GPU, and refuses another GPU;
    all_reduce and one DDP step run on the GPU."""
    _mpiexec()  # skip without MPI
    if not tt.cuda_is_available():
        pytest.skip("the nccl backend needs CuPy and a GPU")
    code = ("import tinytrain as tt, tinytrain.distributed as dist\n"
            "for device_id in (None, 'cuda:0', 0, tt.device('cuda')):\n"
            "    dist.init_process_group('nccl', device_id=device_id)\n"
            "    x = tt.ones(3, device='cuda')\n"
            "    dist.all_reduce(x)\n"
            "    assert x.device == 'cuda' and x.tolist() == [1.0, 1.0, 1.0], x\n"
            "    model = tt.nn.Linear(4, 2).to('cuda')\n"
            "    ddp = dist.DistributedDataParallel(model)\n"
            "    ddp(tt.ones(5, 4, device='cuda')).sum().backward()\n"
            "    assert model.weight.grad.tolist() == [[5.0] * 4] * 2\n"
            "    dist.destroy_process_group()\n"
            "try:\n"
            "    dist.init_process_group('nccl', device_id='cpu')\n"
            "except ValueError as e:\n"
            "    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused: init_process_group: device_id='cpu' on rank 0 of 1: the nccl backend " \
           "runs this rank on GPU 0 (cuda:0)" in r.stdout, r.stdout


def test_pytorchs_group_names_and_rank_helpers_as_torch_on_a_group_of_one():
    """HPC scripts pass group=dist.group.WORLD (it raised "'function' object has no attribute
    'WORLD'") and call get_global_rank, get_process_group_ranks, get_node_local_rank,
    is_torchelastic_launched; a second init raises PyTorch's ValueError, which is also the
    RuntimeError tinytrain raised."""
    _mpiexec()  # skip without MPI
    code = ("import os, tinytrain as tt, tinytrain.distributed as dist\n"
            "assert dist.group.WORLD is None and dist.GroupMember.WORLD is None\n"
            "g = dist.init_process_group('gloo')\n"
            "assert dist.group.WORLD is g and dist.GroupMember.WORLD is g and dist.group() is g\n"
            "assert dist.get_rank(group=dist.group.WORLD) == 0\n"
            "t = tt.ones(2)\n"
            "dist.all_reduce(t, group=dist.group.WORLD)\n"
            "assert dist.get_global_rank(dist.group.WORLD, 0) == 0\n"
            "assert dist.get_process_group_ranks(dist.group.WORLD) == [0]\n"
            "assert dist.get_process_group_ranks(None) == [0]\n"
            "assert dist.is_torchelastic_launched() is False\n"
            "assert dist.get_node_local_rank() == int(os.environ['LOCAL_RANK']) == 0\n"
            "for again in (ValueError, RuntimeError):\n"
            "    try:\n"
            "        dist.init_process_group('gloo')\n"
            "    except again as e:\n"
            "        print('twice:', type(e).__name__, e)\n"
            "dist.destroy_process_group()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("twice: DefaultGroupError trying to initialize the default process "
                          "group twice!") == 2, r.stdout


def test_a_rank_that_fails_before_init_does_not_leave_the_others_waiting_in_it():
    """MPI's own start-up waits in C for every rank: a watchdog ends the rank after the
    timeout, with the stack that says where it waited; the launcher stops the job."""
    code = ("import os, sys\n"
            "rank = os.environ.get('PMI_RANK') or os.environ.get('OMPI_COMM_WORLD_RANK')\n"
            "if rank == '1':\n"
            "    sys.exit('rank 1 fails before init_process_group')\n"
            "import tinytrain.distributed as dist\n"
            "dist.init_process_group('mpi', timeout=3)\n"
            "print('rank 0 got past init_process_group')\n")
    t0 = time.monotonic()
    r = mpirun("-c", code, timeout=60)
    assert r.returncode != 0 and "got past" not in r.stdout
    assert "_rendezvous_waiting_for_every_rank" in r.stderr, r.stderr[-2000:]
    assert time.monotonic() - t0 < 30


def test_init_process_group_refuses_a_bad_timeout():
    import datetime

    import tinytrain.distributed as dist

    for bad, error in ((0, ValueError), (-1.0, ValueError), (float("nan"), ValueError),
                       (datetime.timedelta(0), ValueError), ("5", TypeError),
                       (True, TypeError), ([5], TypeError)):
        with pytest.raises(error, match="init_process_group: timeout"):
            dist.init_process_group("mpi", timeout=bad)
    assert not dist.is_initialized()


def test_ctrl_c_stops_every_rank():
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group."""
    p, pids = _start(WORKER, "wait_forever", new_session=True)
    os.killpg(p.pid, signal.SIGINT)
    code, seconds, out = _finish_within(p, 30)
    assert code != 0 and _all_gone(pids, 30 - seconds)
    assert "KeyboardInterrupt" in out


# ------------------------------------------------------------------ PyTorch's launchers, async work


def test_async_collectives_keep_their_tensors_and_dropped_handles_complete(backend):
    """The reviewer's programs, with PyTorch's (gloo's) values: an async all_reduce of a
    temporary, or one whose handle is dropped, wrote its result into the next tensor NumPy
    made (y = zeros(2) became [1, 1] or [5, 5]; gloo: [0, 0]); a dropped handle completes by
    the next collective's wait or barrier (its average and copies out included);
    Work.wait() returns True."""
    _ok(mpirun(WORKER, "async_buffers", "--backend", backend), "async_buffers")


@pytest.mark.parametrize("n", [2, 3])
def test_point_to_point_new_group_reduce_scatter_all_to_all_bitwise_ops_and_views(backend, n):
    """send/recv (from any rank: returns the sender), isend/irecv, batch_isend_irecv and the
    tutorial's ring all-reduce; new_group(); reduce_scatter(_tensor); all_to_all(_single),
    with split sizes; BAND/BOR/BXOR; a column reduced in place; monitored_barrier: values
    as PyTorch's gloo gives them (on 2 ranks: reduce_scatter [1, 1] / [21, 21],
    all_to_all_single [0, 1, 10, 11] / [2, 3, 12, 13], BAND [4, 0, 12], ...)."""
    if backend == "nccl" and n > 2 and tt.cuda_is_available():
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < n:
            pytest.skip(f"needs {n} GPUs")
    _ok(mpirun(WORKER, "more_collectives", "--backend", backend, n=n), "more_collectives", n=n)


def _alone(code: str, **env: str) -> subprocess.CompletedProcess:
    """``python -c CODE`` without an MPI launcher's variables (as under torchrun or
    mp.spawn), with ``env`` added."""
    _mpiexec()  # skip without MPI
    clean = {k: v for k, v in _env().items()
             if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_LOCAL"))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**clean, **env}, cwd=ROOT)


INIT = ("import tinytrain.distributed as dist\n"
        "dist.init_process_group('gloo', init_method='env://'{})\n"
        "print('initialized', dist.get_rank(), dist.get_world_size())\n")


def test_a_torchrun_launch_without_mpiexec_is_refused_not_run_as_groups_of_one():
    """torchrun sets RANK and WORLD_SIZE but starts no MPI job: each process was a group of
    one and trained alone (the reviewer's all_reduce gave 1.0 and 2.0 instead of 3.0)."""
    r = _alone(INIT.format(""), RANK="1", WORLD_SIZE="2", LOCAL_RANK="1",
               MASTER_ADDR="localhost", MASTER_PORT="29500")
    assert r.returncode != 0 and "initialized" not in r.stdout
    assert "init_process_group: WORLD_SIZE=2 and RANK=1 in the environment (set by torchrun, " \
           "or by hand) say this process is one of 2 ranks, but no mpiexec started it" in r.stderr
    assert "mpiexec -n 2 python script.py, or python -m tinytrain.distributed.launch " \
           "--nproc_per_node 2 script.py" in r.stderr
    r = _alone(INIT.format(""), RANK="0", WORLD_SIZE="1")  # one rank is one rank
    assert r.returncode == 0 and "initialized 0 1" in r.stdout, r.stderr[-2000:]


ENV_AT_IMPORT = ("import os\nimport tinytrain.distributed\n"
                 "print([os.environ.get(k) for k in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK')])\n")


@pytest.mark.parametrize("env,want", [
    # srun --mpi=pmix: PMIx's rank, Slurm's sizes; WORLD_SIZE used to become 1
    ({"PMIX_RANK": "3", "SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
      "WORLD_SIZE": "8"}, ["3", "8", "1"]),
    ({"PMIX_RANK": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "16"}, ["3", "4", None]),
    # Cray PALS; a size no variable gives leaves WORLD_SIZE as it was
    ({"PALS_RANKID": "2", "PALS_LOCAL_RANKID": "0", "WORLD_SIZE": "6"}, ["2", "6", "0"]),
    ({"PMI_RANK": "1", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "1"}, ["1", "4", "1"]),
    ({"PMI_RANK": "1", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "1", "LOCAL_RANK": "3"},
     ["1", "4", "3"]),  # a LOCAL_RANK that is set stays (init_process_group sets MPI's)
])
def test_hpc_launchers_variables_give_torchruns_at_import(env, want):
    r = _alone(ENV_AT_IMPORT, **env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert str(want) in r.stdout, r.stdout


@pytest.mark.parametrize("env,named", [
    ({"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "8"},
     "SLURM_PROCID=3, SLURM_STEP_NUM_TASKS=8"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2"}, "SLURM_STEP_NUM_TASKS=2"),
])
def test_srun_without_mpi_wire_up_is_refused_not_run_as_groups_of_one(env, named):
    """srun with no PMI for the MPI library: each task's MPI is a world of one, and each
    trained alone as "rank 0 of 1" (exit code 0)."""
    r = _alone(INIT.format(""), **env)
    assert r.returncode != 0 and "initialized" not in r.stdout
    assert f"init_process_group: the launcher's variables ({named}) say this process is one " \
           "task of several, but MPI sees it alone" in r.stderr, r.stderr[-2000:]
    assert "srun --mpi=pmi2 or srun --mpi=pmix" in r.stderr
    # a batch script's own python (one task of an allocation of 8) is one process
    r = _alone(INIT.format(""), SLURM_PROCID="0", SLURM_NTASKS="8", SLURM_LOCALID="0")
    assert r.returncode == 0 and "initialized 0 1" in r.stdout, r.stderr[-2000:]


def test_an_mp_spawn_style_init_says_that_no_mpiexec_started_the_process():
    r = _alone(INIT.format(", rank=1, world_size=2"))
    assert r.returncode != 0 and "initialized" not in r.stdout
    assert "init_process_group: world_size=2 (rank=1) was passed, but no mpiexec started this " \
           "process" in r.stderr, r.stderr[-2000:]
    assert "mpiexec started this process as rank 0 of 1" not in r.stderr
    r = _alone(INIT.format(", rank=0, world_size=1"))
    assert r.returncode == 0 and "initialized 0 1" in r.stdout, r.stderr[-2000:]


def test_torchruns_variables_are_set_under_mpiexec_from_the_import_on():
    """A script written for torchrun reads LOCAL_RANK before init_process_group. Stale values
    in the environment are replaced by MPI's."""
    code = ("import os\n"
            "names = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE')\n"
            "import tinytrain.distributed as dist\n"
            "before = [os.environ.get(k) for k in names]\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\n"
            "dist.init_process_group('gloo')\n"
            "after = [os.environ.get(k) for k in names]\n"
            "os.write(1, f'rank {dist.get_rank()} {local_rank} {before} {after}\\n'.encode())\n")
    r = mpirun("-c", code, timeout=60, env={"RANK": "5", "WORLD_SIZE": "7"})
    assert r.returncode == 0, r.stderr[-2000:]
    for k in range(2):
        want = [str(k), str(k), "2", "2"]
        assert f"rank {k} {k} {want} {want}" in r.stdout, r.stdout


FINALIZE = ("{before}from mpi4py import MPI\n"
            "import tinytrain as tt, tinytrain.distributed as dist\n"
            "dist.init_process_group('gloo')\n"
            "t = tt.ones(3)\n"
            "dist.all_reduce(t)\n"
            "import os\n"
            "os.write(1, f'rank {{dist.get_rank()}} sum {{t.numpy().tolist()}}\\n'.encode())\n"
            "{after}")


@pytest.mark.parametrize("before,after,ok", [
    ("", "MPI.Finalize()\n", True),  # the at-exit destroy made MPI calls after finalize
    ("", "MPI.Finalize()\ndist.destroy_process_group()\n", False),
    ("import mpi4py\nmpi4py.rc.initialize = False\n", "", True),  # init left to us
    ("import mpi4py\nmpi4py.rc.initialize = False\n", "dist.destroy_process_group()\n", True),
])
def test_mpi_finalized_by_the_script_or_not_initialised_before_init(before, after, ok):
    r = mpirun("-c", FINALIZE.format(before=before, after=after), timeout=60)
    assert "after finalizing" not in r.stderr and "before initializing" not in r.stderr, \
        r.stderr[-2000:]
    if ok:
        assert r.returncode == 0, r.stderr[-2000:]
        assert "rank 0 sum [2.0, 2.0, 2.0]" in r.stdout and "rank 1 sum" in r.stdout
    else:
        assert r.returncode != 0
        assert "destroy_process_group() on rank 0 of 2: MPI was finalised (MPI.Finalize() " \
               "was called) before it" in r.stderr, r.stderr[-2000:]


def test_a_rank_that_raises_before_init_stops_the_job_at_once():
    """With the default init timeout (30 minutes) the others used to wait that long in their
    init_process_group (the reviewer's run was still waiting when `timeout 120` ended it);
    the exception's hook, installed at import under mpiexec, now joins MPI's start-up and
    aborts: about 1 s."""
    code = ("import os\n"
            "import tinytrain.distributed as dist\n"
            "if (os.environ.get('PMI_RANK') or os.environ.get('OMPI_COMM_WORLD_RANK')) == '1':\n"
            "    raise RuntimeError('rank 1 fails before init_process_group')\n"
            "dist.init_process_group('gloo')\n"
            "print('rank 0 got past init_process_group', flush=True)\n"
            "import time; time.sleep(60)\n")
    t0 = time.monotonic()
    r = mpirun("-c", code, timeout=60)
    assert r.returncode != 0
    assert "RuntimeError: rank 1 fails before init_process_group" in r.stderr
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("wait_all_ranks,late,message", [
    (False, [2], "[Rank 0]: Rank 2 failed to pass monitoredBarrier in 1500 ms"),
    (True, [1, 2], "[Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier in 1500 ms")])
def test_monitored_barrier_names_the_ranks_that_did_not_arrive(wait_all_ranks, late, message):
    """PyTorch's (gloo's) words; a plain barrier's timeout cannot say which ranks are
    missing and points to monitored_barrier."""
    code = ("import datetime, time\n"
            "import tinytrain.distributed as dist\n"
            "dist.init_process_group('gloo')\n"
            f"if dist.get_rank() in {late}:\n"
            "    time.sleep(6)\n"
            "dist.monitored_barrier(timeout=datetime.timedelta(seconds=1.5), "
            f"wait_all_ranks={wait_all_ranks})\n"
            "print('passed', dist.get_rank(), flush=True)\n")
    r = mpirun("-c", code, n=3, timeout=60)
    assert r.returncode != 0 and "passed" not in r.stdout
    assert message in r.stderr, r.stderr[-2000:]


def test_the_launch_and_run_modules_start_the_ranks_with_torchruns_options(tmp_path):
    """`python -m tinytrain.distributed.launch --nproc_per_node 2 script.py` exited 0 and
    ran nothing."""
    _mpiexec()
    (tmp_path / "ranks.py").write_text(
        "import os, sys\n"
        "import tinytrain as tt, tinytrain.distributed as dist\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "dist.init_process_group('gloo')\n"
        "t = tt.ones(1) * (dist.get_rank() + 1)\n"
        "dist.all_reduce(t)\n"
        "os.write(1, f'rank {dist.get_rank()} of {dist.get_world_size()} local {local_rank} '\n"
        "            f'args {sys.argv[1:]} sum {t.item()}\\n'.encode())\n"
        "sys.exit(3 if '--fail' in sys.argv else 0)\n")
    env = {**_env(), "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    for command, args, code in [
            (["launch", "--nproc_per_node", "2", "--standalone"], [str(tmp_path / "ranks.py")], 0),
            (["run", "--nproc-per-node=2"], ["-m", "ranks"], 0),
            (["launch", "--nproc", "2"], [str(tmp_path / "ranks.py"), "--fail"], 3)]:
        r = subprocess.run([sys.executable, "-m", f"tinytrain.distributed.{command[0]}",
                            *command[1:], *args, "--lr", "0.1"], capture_output=True,
                           text=True, timeout=120, env=env, cwd=tmp_path)
        assert r.returncode == code, (command, r.stdout[-2000:], r.stderr[-2000:])
        extra = ["--fail"] if code else []
        for k in range(2):
            assert f"rank {k} of 2 local {k} args {extra + ['--lr', '0.1']} sum 3.0" \
                in r.stdout, (command, r.stdout)
        assert "RuntimeWarning" not in r.stderr, r.stderr
    for bad, message in [(["--nproc_per_node", "2", "--nnodes", "2"],
                          "on several machines run mpiexec with a host file"),
                         (["--nproc_per_node", "0"], "--nproc_per_node must be a positive")]:
        r = subprocess.run([sys.executable, "-m", "tinytrain.distributed.launch", *bad, "x.py"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2 and message in r.stderr, r.stderr


# ------------------------------------------------------------------ the training command

MINI = ["--dataset", "mnist-mini", "--no-download", "--log-every", "10"]


def train(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    _mpiexec()  # skip without MPI
    return subprocess.run([sys.executable, "-m", "tinytrain.train", *MINI, *args],
                          capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT)


def test_training_on_two_ranks_prints_and_saves_once(tmp_path):
    ck, plot = tmp_path / "ck.npz", tmp_path / "curves.png"
    r = train("--nproc", "2", "--model", "mlp", "--optimizer", "sgd", "--lr", "0.1",
              "--save", str(ck), "--plot", str(plot))
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert sum(line.startswith("epoch 1/1 | ") for line in lines) == 1  # rank 0 alone prints
    assert "batch 64 x 2 ranks = 128" in lines[0]
    assert "parameters bit-identical on all 2 ranks" in r.stdout
    final = next(line for line in lines if line.startswith("test: "))
    correct, total = (int(v) for v in final.split()[1].split("/"))
    assert total == 1000 and correct > 300  # every test digit counted once; it learned
    saved = tt.load(ck)
    assert saved["world_size"] == 2 and len(saved["rng_per_rank"]) == 2 and saved["epoch"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz", "curves.png"]  # no temp


def test_a_reader_that_goes_away_does_not_end_a_run_on_two_ranks(tmp_path):
    """`--nproc 2 ... 2>&1 | head -1`: mpiexec wrote into the reader's pipe and died of
    SIGPIPE when it went, taking the ranks with it (no checkpoint, exit 141, no message)."""
    _mpiexec()
    ck = tmp_path / "ck.npz"
    p = subprocess.Popen([sys.executable, "-m", "tinytrain.train", *MINI, "--nproc", "2",
                          "--model", "mlp", "--optimizer", "sgd", "--lr", "0.1", "--epochs",
                          "3", "--save", str(ck)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
    p.stdout.readline()
    p.stdout.close()  # the reader is gone
    assert p.wait(timeout=240) == 0
    assert tt.load(ck)["epoch"] == 3


def _weights(path: Path) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in tt.load(path)["model"].items()}


def test_resume_on_two_ranks_is_exact(tmp_path):
    """1 epoch + 1 resumed epoch on 2 ranks == 2 epochs straight, bit for bit, dropout
    included (every rank's generator is in the checkpoint)."""
    args = ["--model", "convnet", "--optimizer", "adam", "--bs", "128", "--schedule", "constant"]
    straight, split = str(tmp_path / "straight.npz"), str(tmp_path / "split.npz")
    assert train("--nproc", "2", *args, "--epochs", "2", "--save", straight).returncode == 0
    assert train("--nproc", "2", *args, "--epochs", "1", "--save", split).returncode == 0
    r = train("--nproc", "2", *args, "--epochs", "2", "--resume", split, "--save", split)
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = _weights(Path(straight)), _weights(Path(split))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _start_training(*args: str) -> subprocess.Popen:
    _mpiexec()
    return subprocess.Popen([sys.executable, "-m", "tinytrain.train", *MINI, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_env(), cwd=ROOT, start_new_session=True)


def _stop_after_first_checkpoint(p: subprocess.Popen, ck: Path, sig: int) -> tuple[int, str]:
    """Send ``sig`` to the run's whole process group once ``ck`` exists; its exit code and
    output."""
    deadline = time.perf_counter() + 120
    while not ck.exists() and p.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert ck.exists(), "no checkpoint was written"
    os.killpg(p.pid, sig)
    code, _, out = _finish_within(p, 30)
    return code, out


def test_a_cosine_run_of_two_ranks_continues_on_one(tmp_path):
    """Interrupted after epoch 1 on 2 ranks (40 steps per epoch: 2,500 digits each, batch 64),
    finished on 1 rank (79 steps per epoch): the schedule continues at epoch 1 of 3."""
    args = ["--model", "convnet", "--optimizer", "adam", "--epochs", "3"]
    ck = tmp_path / "ck.npz"
    code, out = _stop_after_first_checkpoint(
        _start_training("--nproc", "2", *args, "--save", str(ck)), ck, signal.SIGTERM)
    assert code == 143, out[-3000:]
    first = tt.load(ck)
    assert first["world_size"] == 2 and first["epoch"] in (1, 2)
    assert first["schedule"]["last_epoch"] == first["epoch"] * 40
    r = train("--resume", str(ck), "--save", str(ck))  # the settings come from the checkpoint
    assert r.returncode == 0, r.stderr[-3000:]
    assert "saved by 2 rank(s), continued on 1" in r.stdout
    done = tt.load(ck)
    assert (done["epoch"], done["world_size"]) == (3, 1)
    assert done["schedule"]["last_epoch"] == done["schedule"]["T_max"] == 3 * 79
    steps = first["epoch"] * 40 + (3 - first["epoch"]) * 79
    assert done["optimizer_steps"] == steps
    assert {s["step"] for s in done["optimizer"]["state"].values()} == {steps}  # Adam's count
    assert float(r.stdout.split("accuracy ")[-1].split("%")[0]) > 90


def test_a_run_of_one_rank_continues_on_two(tmp_path):
    args = ["--model", "mlp", "--optimizer", "sgd", "--lr", "0.1", "--schedule", "constant"]
    ck = str(tmp_path / "ck.npz")
    r = train(*args, "--epochs", "1", "--save", ck)
    assert r.returncode == 0 and tt.load(ck)["world_size"] == 1
    first = _accuracy(r.stdout)
    r = train("--nproc", "2", *args, "--epochs", "3", "--resume", ck, "--save", ck)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "saved by 1 rank(s), continued on 2" in r.stdout
    two = tt.load(ck)
    assert (two["epoch"], two["world_size"], two["optimizer_steps"]) == (3, 2, 79 + 2 * 40)
    assert len(two["rng_per_rank"]) == 2
    assert _accuracy(r.stdout) > first  # it kept learning


def _accuracy(stdout: str) -> float:
    return float(stdout.split("accuracy ")[-1].split("%")[0])


def test_ctrl_c_stops_a_training_run_on_two_ranks_and_keeps_the_checkpoint(tmp_path):
    ck = tmp_path / "ck.npz"
    code, out = _stop_after_first_checkpoint(
        _start_training("--nproc", "2", "--model", "mlp", "--epochs", "200", "--save", str(ck)),
        ck, signal.SIGINT)
    assert code == 130, out[-3000:]
    assert "interrupted; the last checkpoint, after epoch" in out and tt.load(ck)["epoch"] >= 1
    assert [f.name for f in tmp_path.iterdir()] == ["ck.npz"]
    assert not _processes_mentioning(str(tmp_path)), "ranks still running"


def _processes_mentioning(text: str) -> list[str]:
    """The pids whose command line contains ``text`` (only this test's runs name tmp_path)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and text in (d / "cmdline").read_bytes().decode(errors="replace"):
                found.append(d.name)
        except OSError:  # it exited meanwhile
            pass
    return found


def test_nproc_that_contradicts_mpiexec_is_refused():
    r = mpirun("-m", "tinytrain.train", *MINI, "--nproc", "3", timeout=60)
    assert r.returncode != 0
    assert "--nproc 3, but mpiexec started 2 processes" in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_launcher_alone_is_passed_on_at_once(tmp_path, sig):
    """``kill <pid of python -m tinytrain.train --nproc 2>`` (a scheduler, a script): the ranks
    did not get the signal, so the launcher passes it on now (it used to wait 10 s, and a run
    that finished meanwhile was reported interrupted). Stopped, with the checkpoint."""
    ck = tmp_path / "ck.npz"
    p = _start_training("--nproc", "2", "--model", "mlp", "--optimizer", "sgd", "--lr", "0.1",
                        "--epochs", "200", "--save", str(ck))
    deadline = time.perf_counter() + 120
    while not ck.exists() and p.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert ck.exists(), "no checkpoint was written"
    p.send_signal(sig)  # the launcher's process only, not its group
    code, seconds, out = _finish_within(p, 30)
    assert code == 128 + sig and seconds < 8, (code, seconds, out[-3000:])
    assert 1 <= tt.load(ck)["epoch"] < 200
    assert "the last checkpoint, after epoch" in out and "Traceback" not in out


def test_a_wrapper_used_after_its_group_was_destroyed_says_so():
    """A group of one (no mpiexec): the wrapper's forward after destroy_process_group()
    raises a clear error instead of MPICH's 'Invalid communicator'."""
    _mpiexec()  # skip without MPI
    code = ("import tinytrain as tt, tinytrain.distributed as dist\n"
            "dist.init_process_group('mpi')\n"
            "ddp = dist.DistributedDataParallel(tt.nn.Linear(3, 2))\n"
            "dist.destroy_process_group()\n"
            "try:\n"
            "    ddp(tt.ones(1, 3))\n"
            "except RuntimeError as e:\n"
            "    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=ROOT)
    assert "refused:" in r.stdout and "process group was destroyed" in r.stdout, r.stderr[-2000:]
