"""The training command never does something silently wrong and never loses a checkpoint.

Resume checks what it resumes (issue 8, item 9), divergence stops the run (10), output paths
are checked before training (11), signals and failed writes leave the last checkpoint and no
temporary file (12), and every user error is one line with exit status 2 (13). Runs on the
bundled mnist-mini set with the small ``mlp``; most cases stop before the first step.
"""

from __future__ import annotations

import copy
import errno
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tinytrain as tt
from tinytrain import train as train_mod
from tinytrain.train import main

MINI = ["--dataset", "mnist-mini", "--no-download", "--log-every", "10"]
SGD = ["--model", "mlp", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9",
       "--schedule", "constant"]
ADAM_COSINE = ["--model", "mlp", "--optimizer", "adam", "--schedule", "cosine", "--epochs", "2"]


def error_line(err: str) -> str:
    """The one error line on stderr (besides the progress bar's): no usage, no traceback."""
    assert "Traceback" not in err
    lines = [s.strip() for s in re.split(r"[\r\n]", err)
             if s.strip() and not re.match(r"epoch \d+/\d+: ", s)]
    assert len(lines) == 1, err
    assert lines[0].startswith("python -m tinytrain.train: error: "), err
    return lines[0]


def usage_error(capsys, argv: list[str]) -> str:
    capsys.readouterr()  # drop what earlier runs printed
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "epoch 1/" not in out  # stopped before training
    return error_line(err)


def weights(path: Path) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in tt.load(path)["model"].items()}


def no_temp_files(folder: Path) -> bool:
    return all(not p.name.startswith(".") for p in folder.iterdir())


@pytest.fixture(scope="module")
def sgd_ck(tmp_path_factory) -> Path:
    """One epoch of mlp + SGD (momentum 0.9, constant rate) on mnist-mini."""
    path = tmp_path_factory.mktemp("ck") / "sgd.npz"
    assert main([*SGD, *MINI, "--epochs", "1", "--save", str(path)]) == 0
    return path


def _interrupt_in_epoch(monkeypatch, epoch: int, exc: type[BaseException] = KeyboardInterrupt,
                        before=None) -> None:
    """Make epoch ``epoch`` raise ``exc`` (or, with ``before``, call it on the model first)."""
    real = train_mod.train_one_epoch
    calls = {"n": 0}

    def patched(model, *a, **k):
        calls["n"] += 1
        if calls["n"] == epoch:
            if before is None:
                raise exc
            before(model)
        return real(model, *a, **k)

    monkeypatch.setattr(train_mod, "train_one_epoch", patched)


# --------------------------------------------------------------------- 9: resume checks


@pytest.mark.parametrize("flag,value,saved", [
    ("--batch-size", "32", "64"),
    ("--bs", "128", "64"),
    ("--seed", "1", "0"),
    ("--lr", "0.2", "0.1"),
    ("--momentum", "0.5", "0.9"),
    ("--optimizer", "adam", "sgd"),
    ("--model", "cnn", "mlp"),
    ("--dataset", "fashion-mnist", "mnist-mini"),
    ("--schedule", "cosine", "constant"),
])
def test_resume_refuses_a_setting_that_differs(capsys, sgd_ck, flag, value, saved):
    line = usage_error(capsys, ["--resume", str(sgd_ck), "--no-download", flag, value])
    name = "--batch-size" if flag == "--bs" else flag
    assert f"{name} {value} differs from the checkpoint's {saved}" in line


def test_a_preset_that_contradicts_the_checkpoint_is_refused(capsys, sgd_ck):
    line = usage_error(capsys, ["--resume", str(sgd_ck), "--no-download", "--preset",
                                "infinitrain"])
    assert "(from --preset infinitrain) differs from the checkpoint's" in line


def test_resume_refuses_another_horizon_for_a_cosine_schedule(capsys, tmp_path):
    ck = tmp_path / "cos.npz"
    assert main([*ADAM_COSINE, *MINI, "--epochs", "1", "--save", str(ck)]) == 0
    line = usage_error(capsys, ["--resume", str(ck), "--no-download", "--epochs", "3"])
    assert "--epochs 3 differs from the checkpoint's 1" in line and "cosine" in line


def test_resume_refuses_fewer_epochs_than_done(capsys, tmp_path):
    ck = tmp_path / "c.npz"
    assert main([*SGD, *MINI, "--epochs", "2", "--save", str(ck)]) == 0
    line = usage_error(capsys, ["--resume", str(ck), "--no-download", "--epochs", "1"])
    assert "--epochs 1 is fewer than the 2 epochs" in line


def test_resume_without_flags_takes_every_setting_from_the_checkpoint(tmp_path, monkeypatch,
                                                                     capsys):
    """Non-default settings everywhere; the resumed half gets none of them on its command line
    and still ends bit-identical to the straight run."""
    run = ["--model", "mlp", "--optimizer", "sgd", "--lr", "0.07", "--momentum", "0.5",
           "--batch-size", "100", "--seed", "3", "--schedule", "cosine", "--epochs", "2",
           *MINI]
    assert main([*run, "--save", str(tmp_path / "straight.npz")]) == 0
    with monkeypatch.context() as m:
        _interrupt_in_epoch(m, 2)
        assert main([*run, "--save", str(tmp_path / "split.npz")]) == 130
    capsys.readouterr()
    split = str(tmp_path / "split.npz")
    assert main(["--resume", split, "--save", split, "--no-download"]) == 0
    out = capsys.readouterr().out
    taken = next(line for line in out.splitlines() if line.startswith("settings from the "))
    for setting in ("--dataset mnist-mini", "--model mlp", "--batch-size 100", "--seed 3",
                    "--optimizer sgd", "--lr 0.07", "--momentum 0.5", "--schedule cosine",
                    "--epochs 2"):
        assert setting in taken
    assert "sgd lr 0.07 momentum 0.5 (cosine) | batch 100" in out
    straight, resumed = weights(tmp_path / "straight.npz"), weights(tmp_path / "split.npz")
    for k in straight:
        np.testing.assert_array_equal(straight[k], resumed[k], err_msg=k)


@pytest.mark.parametrize("run", [ADAM_COSINE, SGD], ids=["adam-cosine", "sgd-constant"])
def test_a_checkpoint_of_an_earlier_version_without_the_new_optimizer_options_resumes(
        run, tmp_path, monkeypatch, capsys):
    """A checkpoint written before the optimizers took amsgrad/maximize/foreach/... (their
    param group has none of those keys) was refused ("its optimizer settings ... are not
    adam's"); absent, they are at their defaults, and the run continues bit for bit."""
    run = [*run, *MINI] + ([] if "--epochs" in run else ["--epochs", "2"])
    assert main([*run, "--save", str(tmp_path / "straight.npz")]) == 0
    with monkeypatch.context() as m:
        _interrupt_in_epoch(m, 2)
        assert main([*run, "--save", str(tmp_path / "split.npz")]) == 130
    ck = tt.load(tmp_path / "split.npz")
    group = ck["optimizer"]["param_groups"][0]
    added = {"amsgrad", "maximize", "foreach", "fused", "capturable", "differentiable",
             "decoupled_weight_decay"}  # (what 3b1fe43's groups did not have)
    assert added & set(group)  # (this version writes some of them)
    for key in added:
        group.pop(key, None)
    tt.save(ck, tmp_path / "split.npz")
    capsys.readouterr()
    split = str(tmp_path / "split.npz")
    assert main(["--resume", split, "--save", split, "--no-download"]) == 0, \
        capsys.readouterr().err
    straight, resumed = weights(tmp_path / "straight.npz"), weights(tmp_path / "split.npz")
    for k in straight:
        np.testing.assert_array_equal(straight[k], resumed[k], err_msg=k)


def test_a_fallback_run_resumes_on_the_same_data_set(tmp_path, monkeypatch, capsys):
    """A run that fell back to mnist-mini records mnist-mini, so resume does not switch data."""
    monkeypatch.setenv("TINYTRAIN_DATA", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    ck = str(tmp_path / "ck.npz")
    assert main([*SGD, "--no-download", "--epochs", "1", "--save", ck]) == 0
    assert tt.load(ck)["settings"]["dataset"] == "mnist-mini"
    capsys.readouterr()
    assert main(["--resume", ck, "--no-download", "--epochs", "2", "--save", ck]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "mnist-mini: 5,000 train" in captured.out
    assert tt.load(ck)["epoch"] == 2


# --------------------------------------------------------------------- 10: divergence


def _poison(model) -> None:
    p = next(iter(model.parameters()))
    p.data[...] = np.nan


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path,
                                                                           monkeypatch, capsys):
    ck = tmp_path / "ck.npz"
    _interrupt_in_epoch(monkeypatch, 2, before=_poison)
    assert main([*SGD, *MINI, "--epochs", "3", "--save", str(ck)]) == 1
    line = error_line(capsys.readouterr().err)
    assert "diverged" in line and "nan" in line and "after epoch 1, is intact" in line
    back = tt.load(ck)
    assert back["epoch"] == 1
    assert all(np.isfinite(w).all() for w in weights(ck).values())
    assert no_temp_files(tmp_path)


def test_non_finite_weights_after_a_finite_loss_are_not_saved(tmp_path, monkeypatch, capsys):
    real = train_mod.train_one_epoch

    def then_poison(model, *a, **k):
        result = real(model, *a, **k)
        _poison(model)  # the last step blew the weights up, after its loss was computed
        return result

    monkeypatch.setattr(train_mod, "train_one_epoch", then_poison)
    ck = tmp_path / "ck.npz"
    assert main([*SGD, *MINI, "--epochs", "1", "--save", str(ck)]) == 1
    line = error_line(capsys.readouterr().err)
    assert "is not finite after epoch 1" in line and "no checkpoint of this run" in line
    assert not ck.exists()


def test_a_real_divergence_exits_1_without_a_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tinytrain.train", *SGD, *MINI, "--lr", "1e38",
                        "--save", str(tmp_path / "ck.npz")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "diverged" in r.stderr and not (tmp_path / "ck.npz").exists()
    # one line: NumPy's overflow warnings on the way there are not printed
    assert "RuntimeWarning" not in r.stderr, r.stderr[-2000:]


def test_a_reader_that_goes_away_does_not_end_the_run(tmp_path):
    """`python -m tinytrain.train ... | head -1`: the pipe closes after the first line; the
    run must still train and save, not die of a BrokenPipeError."""
    ck = tmp_path / "ck.npz"
    p = subprocess.Popen([sys.executable, "-m", "tinytrain.train", *SGD, *MINI, "--epochs", "2",
                          "--save", str(ck)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # the reader is gone
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and "Traceback" not in err, err[-2000:]
    assert tt.load(ck)["epoch"] == 2


def test_a_stderr_reader_that_goes_away_does_not_end_the_run(tmp_path):
    """`... 2>&1 | head -2`: the progress bar writes to stderr; once that reader has gone the
    run must still train every epoch and save (it stopped after epoch 1, exit 1, silently)."""
    ck = tmp_path / "ck.npz"
    p = subprocess.Popen([sys.executable, "-m", "tinytrain.train", *SGD, *MINI, "--epochs", "3",
                          "--save", str(ck)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    p.stderr.read(1)
    p.stderr.close()  # the reader is gone
    assert p.wait(timeout=300) == 0
    assert tt.load(ck)["epoch"] == 3


@pytest.mark.parametrize("closed", ["stdout", "stderr"])
def test_a_stream_closed_at_the_start_does_not_stop_the_run(tmp_path, closed):
    """A job started with `>&-` or `2>&-` (Python then has sys.stdout/stderr = None): the run
    trains and saves (it failed before the first step)."""
    ck = tmp_path / "ck.npz"
    cmd = " ".join([shlex.quote(sys.executable), "-m", "tinytrain.train", *SGD, *MINI,
                    "--epochs", "1", "--save", shlex.quote(str(ck))])
    r = subprocess.run(["bash", "-c", cmd + (" >&-" if closed == "stdout" else " 2>&-")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    assert tt.load(ck)["epoch"] == 1


@pytest.mark.parametrize("args,expected", [
    (["--momentum", "nan"], "--momentum must be a number in [0, 1)"),
    (["--momentum", "inf"], "--momentum must be a number in [0, 1)"),
    (["--momentum", "1"], "--momentum must be a number in [0, 1)"),
    (["--momentum", "1.5"], "--momentum must be a number in [0, 1)"),
    (["--momentum", "-0.1"], "--momentum must be a number in [0, 1)"),
    (["--lr", "nan"], "--lr must be a positive finite number"),
    (["--lr", "inf"], "--lr must be a positive finite number"),
    (["--lr=-inf"], "--lr must be a positive finite number"),
    (["--lr", "1e400"], "--lr must be a positive finite number"),
    (["--lr", "1e-400"], "--lr must be a positive finite number"),
    (["--seed", "-1"], "--seed must be an integer in [0, 2**64)"),
    (["--seed", str(2**64)], "--seed must be an integer in [0, 2**64)"),
    (["--eval-batch-size", "0"], "--eval-batch-size must be a positive integer"),
    (["--eval-batch-size", "-5"], "--eval-batch-size must be a positive integer"),
    (["--log-every", "0"], "--log-every must be a positive integer"),
    (["--batch-size", "-1"], "--batch-size must be a positive integer"),
    (["--epochs", "-2"], "--epochs must be a positive integer"),
    (["--optimizer", "adam", "--momentum", "0.5"], "--momentum applies to --optimizer sgd"),
    (["--epochs", "1.5"], "argument --epochs: invalid int value"),
    (["--lr", "fast"], "argument --lr: invalid float value"),
    (["--schedule", "linear"], "argument --schedule: invalid choice"),
    (["--device", "tpu"], "argument --device: invalid choice"),
    (["--batch-size"], "argument --batch-size/--bs: expected one argument"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["extra"], "unrecognized arguments: extra"),
    (["--data-dir", "/nonexistent/x"], "--data-dir /nonexistent/x is not a readable directory"),
    (["--data-dir", ""], "--data-dir needs a folder name"),
    (["--resume", ""], "--resume needs a file name: no such checkpoint file"),
    (["--resume", "/nonexistent/ck.npz"], "no such checkpoint file"),
])
def test_every_bad_flag_is_one_line_and_exit_2(capsys, args, expected):
    argv = ["--model", "mlp", "--optimizer", "sgd", *MINI, *args]
    assert expected in usage_error(capsys, argv)


def test_resuming_non_finite_weights_or_optimizer_state_is_refused(tmp_path, capsys, sgd_ck):
    ck = tt.load(sgd_ck)
    bad = copy.deepcopy(ck)
    bad["model"]["fc1.weight"].data[0, 0] = np.inf
    tt.save(bad, tmp_path / "w.npz")
    line = usage_error(capsys, [*SGD, *MINI, "--resume", str(tmp_path / "w.npz")])
    assert "weights are not finite (fc1.weight" in line
    bad = copy.deepcopy(ck)
    bad["optimizer"]["state"][0]["momentum_buffer"][1, 2] = np.nan
    tt.save(bad, tmp_path / "o.npz")
    line = usage_error(capsys, [*SGD, *MINI, "--resume", str(tmp_path / "o.npz")])
    assert "optimizer state is not finite" in line


# --------------------------------------------------------------------- 11: outputs up front


@pytest.fixture
def places(tmp_path, sgd_ck) -> dict[str, str]:
    (tmp_path / "folder").mkdir()
    (tmp_path / "notes.txt").write_text("my notes")
    (tmp_path / "a_file").write_text("x")
    tt.save({"0.weight": tt.zeros(2)}, tmp_path / "weights.npz")  # a tt.save file, not ours
    other_ck = tmp_path / "other.npz"
    other_ck.write_bytes(sgd_ck.read_bytes())
    return {"tmp": str(tmp_path), "ck": str(other_ck)}


@pytest.mark.parametrize("args,expected", [
    (["--save", "{tmp}/folder"], "is a folder"),
    (["--save", "{tmp}/new/"], "is a folder"),
    (["--save", ""], "--save needs a file name"),
    (["--save", "{tmp}/a_file/ck.npz"], "a_file is a file, not a folder"),
    (["--save", "/dev/null"], "exists and is not a regular file"),
    (["--save", "{tmp}/notes.txt"], "is not a checkpoint of this command"),
    (["--save", "{tmp}/weights.npz"], "is not a checkpoint of this command"),
    (["--plot", "{tmp}/folder"], "is a folder"),
    (["--plot", ""], "--plot needs a file name"),
    (["--plot", "{tmp}/curves.bmp"], "unknown image format '.bmp'"),
    (["--plot", "{tmp}/curves"], "unknown image format '(no suffix)'"),
    pytest.param(["--plot", "{tmp}/curves.pgf"], "matplotlib cannot write .pgf here",
                 marks=pytest.mark.skipif(shutil.which("xelatex") is not None,
                                          reason="LaTeX is installed: .pgf works here")),
    (["--plot", "{tmp}/a_file/c.png"], "a_file is a file, not a folder"),
    (["--save", "{tmp}/x.png", "--plot", "{tmp}/x.png"], "--plot and --save are the same file"),
    (["--save", "{tmp}/x.png", "--plot", "{tmp}/sub/../x.png"], "are the same file"),
    (["--resume", "{ck}", "--plot", "{ck}"], "is the --resume checkpoint"),
    (["--plot", "{tmp}/other.npz"], "is a tinytrain checkpoint"),
])
def test_bad_output_paths_are_refused_before_training(capsys, places, args, expected):
    (Path(places["tmp"]) / "sub").mkdir()
    argv = [a.format(**places) for a in args]
    resume = "--resume" in argv
    line = usage_error(capsys, ([] if resume else [*SGD]) + [*MINI, *argv])
    assert expected in line


def test_plot_never_replaces_a_checkpoint(capsys, tmp_path, sgd_ck):
    disguised = tmp_path / "ck.png"
    disguised.write_bytes(sgd_ck.read_bytes())
    line = usage_error(capsys, [*SGD, *MINI, "--plot", str(disguised)])
    assert "is a tinytrain checkpoint" in line


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_an_unwritable_folder_is_refused_before_training(capsys):
    assert "cannot write in /proc" in usage_error(capsys, [*SGD, *MINI, "--save",
                                                           "/proc/tinytrain-ck.npz"])


@pytest.mark.parametrize("suffix,magic", [(".pdf", b"%PDF"), (".svg", b"<?xml"),
                                          (".png", b"\x89PNG")])
def test_plot_format_follows_the_suffix(tmp_path, suffix, magic):
    plot = tmp_path / "deep" / "er" / f"curves{suffix}"
    assert main([*SGD, *MINI, "--epochs", "1", "--plot", str(plot),
                 "--save", str(tmp_path / "new" / "ck.npz")]) == 0
    assert plot.read_bytes().startswith(magic)
    assert tt.load(tmp_path / "new" / "ck.npz")["epoch"] == 1
    assert no_temp_files(plot.parent)


# --------------------------------------------------------------------- 12: signals, full disk


def test_interrupt_before_the_first_save_does_not_claim_a_checkpoint(tmp_path, monkeypatch,
                                                                    capsys):
    _interrupt_in_epoch(monkeypatch, 1)
    assert main([*SGD, *MINI, "--epochs", "2", "--save", str(tmp_path / "ck.npz")]) == 130
    err = capsys.readouterr().err
    assert "intact" not in err and "no checkpoint of this run was written" in err
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_after_the_rename_names_the_epoch_the_file_holds(tmp_path, monkeypatch,
                                                                      capsys):
    """The signal lands after the new file took the old one's place (here, in the folder's
    fsync), before the command noted it: the message must name the new epoch."""
    from tinytrain.data import idx

    real, calls = idx._fsync_dir, {"n": 0}

    def fsync_dir(folder):
        real(folder)
        calls["n"] += 1
        if calls["n"] == 2:  # epoch 2's save
            raise KeyboardInterrupt

    monkeypatch.setattr(idx, "_fsync_dir", fsync_dir)
    ck = tmp_path / "ck.npz"
    assert main([*SGD, *MINI, "--epochs", "3", "--save", str(ck)]) == 130
    assert tt.load(ck)["epoch"] == 2
    assert "the last checkpoint, after epoch 2, is intact" in capsys.readouterr().err


def test_a_full_disk_is_one_line_and_keeps_the_old_checkpoint(tmp_path, monkeypatch, capsys):
    ck = tmp_path / "ck.npz"
    real_savez = np.savez
    calls = {"n": 0}

    def savez(file, *a, **k):
        calls["n"] += 1
        if calls["n"] == 1:
            return real_savez(file, *a, **k)
        file.write(b"PK\x03\x04 the first bytes")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", savez)
    assert main([*SGD, *MINI, "--epochs", "2", "--save", str(ck)]) == 1
    line = error_line(capsys.readouterr().err)
    assert "could not write the checkpoint" in line and "No space left on device" in line
    assert "after epoch 1, is intact" in line
    monkeypatch.undo()
    assert tt.load(ck)["epoch"] == 1 and no_temp_files(tmp_path)


SIGTERM_DURING_SAVE = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    from tinytrain.train import main
    real, calls = np.savez, []
    def savez(file, *a, **k):
        calls.append(1)
        if len(calls) == 1:
            return real(file, *a, **k)
        file.write(b"PK half an archive")
        os.kill(os.getpid(), signal.SIGTERM)  # arrives in the middle of the second save
        return real(file, *a, **k)
    np.savez = savez
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX")
def test_sigterm_during_a_save_leaves_the_last_checkpoint_and_no_temp_file(tmp_path):
    ck = tmp_path / "ck.npz"
    r = subprocess.run([sys.executable, "-c", SIGTERM_DURING_SAVE, *SGD, *MINI, "--epochs", "3",
                        "--save", str(ck)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 143, r.stderr
    assert "terminated (SIGTERM)" in r.stderr and "after epoch 1, is intact" in r.stderr
    assert "Traceback" not in r.stderr
    assert tt.load(ck)["epoch"] == 1 and no_temp_files(tmp_path)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_sigterm_to_a_running_command(tmp_path):
    ck = tmp_path / "ck.npz"
    p = subprocess.Popen([sys.executable, "-m", "tinytrain.train", *SGD, *MINI, "--epochs", "100",
                          "--save", str(ck)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        for line in p.stdout:
            if line.startswith("epoch 2/100 |"):  # so epoch 1's checkpoint is written
                break
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    assert tt.load(ck)["epoch"] >= 1 and no_temp_files(tmp_path)


# --------------------------------------------------------------------- 13: crafted checkpoints


def _mutations() -> dict:
    def drop(*keys):
        def f(ck):
            d = ck
            for k in keys[:-1]:
                d = d[k]
            del d[keys[-1]]
        return f

    def put(value, *keys):
        def f(ck):
            d = ck
            for k in keys[:-1]:
                d = d[k]
            d[keys[-1]] = value
        return f

    cases = {f"no {k}": drop(k) for k in ("format", "settings", "epoch", "model", "optimizer",
                                          "schedule", "rng", "history")}
    cases |= {f"no setting {k}": drop("settings", k) for k in (
        "dataset", "model", "batch_size", "seed", "optimizer", "lr", "momentum", "schedule",
        "epochs", "train_size")}
    cases |= {
        "old format": put(1, "format"),
        "future format": put(99, "format"),
        "epoch is a string": put("1", "epoch"),
        "epoch is a bool": put(True, "epoch"),
        "epoch negative": put(-1, "epoch"),
        "epoch beyond the run": put(5, "epoch"),
        "settings is a list": put([1], "settings"),
        "model is a list": put([], "model"),
        "batch size a string": put("64", "settings", "batch_size"),
        "lr nan": put(float("nan"), "settings", "lr"),
        "momentum 2": put(2.0, "settings", "momentum"),
        "unknown model": put("resnet", "settings", "model"),
        "unknown dataset": put("cifar", "settings", "dataset"),
        "train size differs": put(4999, "settings", "train_size"),
        "missing weight": drop("model", "fc2.bias"),
        "extra weight": put(tt.zeros(3), "model", "fc3.weight"),
        "weight of another shape": put(tt.zeros(30, 10), "model", "fc1.weight"),
        "weight float64": put(tt.tensor(np.zeros((30, 784))), "model", "fc1.weight"),
        "weight not a tensor": put(3.0, "model", "fc1.weight"),
        "no param_groups": drop("optimizer", "param_groups"),
        "param_groups a dict": put({}, "optimizer", "param_groups"),
        "two param groups": lambda ck: ck["optimizer"]["param_groups"].append(
            dict(ck["optimizer"]["param_groups"][0])),
        "params of another model": put([0, 1, 2], "optimizer", "param_groups", 0, "params"),
        "optimizer lr negative": put(-0.1, "optimizer", "param_groups", 0, "lr"),
        "optimizer lr differs": put(0.5, "optimizer", "param_groups", 0, "lr"),
        "optimizer momentum differs": put(0.1, "optimizer", "param_groups", 0, "momentum"),
        "weight decay added": put(5.0, "optimizer", "param_groups", 0, "weight_decay"),
        "nesterov switched on": put(True, "optimizer", "param_groups", 0, "nesterov"),
        "unknown optimizer setting": put(1, "optimizer", "param_groups", 0, "foreach"),
        "buffer of integers": put(np.zeros((30, 784), np.int64), "optimizer", "state", 0,
                                  "momentum_buffer"),
        "buffer of strings": put(np.full((30, 784), "x"), "optimizer", "state", 0,
                                 "momentum_buffer"),
        "state of one parameter missing": drop("optimizer", "state", 3),
        "no state": drop("optimizer", "state"),
        "state for no parameter": put({"momentum_buffer": np.zeros(1)}, "optimizer", "state", 9),
        "state without its buffer": put({}, "optimizer", "state", 0),
        "state with an extra buffer": lambda ck: ck["optimizer"]["state"][0].update(x=1),
        "buffer of another shape": put(np.zeros(3, np.float32), "optimizer", "state", 0,
                                       "momentum_buffer"),
        "buffer not an array": put("zeros", "optimizer", "state", 0, "momentum_buffer"),
        "schedule state for a constant run": put({"T_max": 3}, "schedule"),
        "rng garbage": put({"bit_generator": "nope"}, "rng"),
        "history not lists": put("none", "history", "step_loss"),
        "history length wrong": put([], "history", "epoch_acc"),
    }
    return cases


MUTATIONS = _mutations()


@pytest.mark.parametrize("case", list(MUTATIONS))
def test_a_crafted_checkpoint_is_one_line_and_exit_2(tmp_path, capsys, sgd_ck, case):
    ck = copy.deepcopy(tt.load(sgd_ck))
    MUTATIONS[case](ck)
    path = tmp_path / "crafted.npz"
    tt.save(ck, path)
    # the flags of the run that wrote it, so only the damage can be the problem
    assert str(path) in usage_error(capsys, [*SGD, *MINI, "--resume", str(path)])


@pytest.mark.parametrize("case", ["schedule position", "schedule horizon", "schedule base lr",
                                  "adam step", "adam step count", "adam state shape",
                                  "optimizer lr", "adam betas"])
def test_a_crafted_cosine_adam_checkpoint_is_refused(tmp_path, capsys, case):
    good = tmp_path / "good.npz"
    assert main([*ADAM_COSINE, *MINI, "--epochs", "1", "--save", str(good)]) == 0
    capsys.readouterr()
    ck = tt.load(good)
    if case == "schedule position":
        ck["schedule"]["last_epoch"] -= 1
    elif case == "schedule horizon":
        ck["schedule"]["T_max"] *= 2
    elif case == "schedule base lr":
        ck["schedule"]["base_lrs"] = [1.0]
    elif case == "adam step":
        ck["optimizer"]["state"][0]["step"] = "many"
    elif case == "adam step count":
        ck["optimizer"]["state"][2]["step"] += 1
    elif case == "optimizer lr":
        ck["optimizer"]["param_groups"][0]["lr"] = 1e-3  # the finished schedule is at 0
    elif case == "adam betas":
        ck["optimizer"]["param_groups"][0]["betas"] = (0.5, 0.999)
    else:
        ck["optimizer"]["state"][1]["exp_avg"] = np.zeros(7, np.float32)
    tt.save(ck, tmp_path / "bad.npz")
    assert "bad.npz" in usage_error(capsys, [*ADAM_COSINE, *MINI, "--epochs", "1", "--resume",
                                             str(tmp_path / "bad.npz")])


@pytest.mark.parametrize("content", [b"", b"not a zip", b"PK\x03\x04 truncated"])
def test_a_file_that_is_not_a_checkpoint_is_one_line(tmp_path, capsys, content):
    path = tmp_path / "x.npz"
    path.write_bytes(content)
    assert "x.npz" in usage_error(capsys, ["--resume", str(path), "--no-download"])


def test_a_tt_save_file_that_is_not_a_checkpoint_is_one_line(tmp_path, capsys):
    for i, obj in enumerate([[1, 2], {"model": {}}, {"format": 2}]):
        tt.save(obj, tmp_path / f"{i}.npz")
        assert f"{i}.npz" in usage_error(capsys, ["--resume", str(tmp_path / f"{i}.npz"),
                                                  "--no-download"])


# --------------------------------------------------------------------- 13: data errors


MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def test_missing_data_uses_the_commands_words(capsys, tmp_path):
    line = usage_error(capsys, [*SGD, "--dataset", "mnist", "--data-dir", str(tmp_path),
                                "--no-download"])
    assert "--no-download" in line and "train-images-idx3-ubyte.gz" in line
    assert "download=" not in line and "MNISTMini()" not in line
    assert str(tmp_path / "mnist") in line


def test_a_corrupt_file_uses_the_commands_words(capsys, tmp_path):
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / MNIST_FILES[0]).write_bytes(b"\x1f\x8b truncated")
    line = usage_error(capsys, [*SGD, "--dataset", "mnist", "--data-dir", str(tmp_path),
                                "--no-download"])
    assert "corrupt" in line and "--no-download" in line and "download=True" not in line


@pytest.mark.parametrize("explicit_dataset", [True, False])
def test_a_plain_file_where_the_data_folder_should_be_says_so(capsys, tmp_path,
                                                             explicit_dataset):
    (tmp_path / "mnist").write_text("oops")
    argv = [*SGD, "--data-dir", str(tmp_path), "--no-download"]
    line = usage_error(capsys, argv + (["--dataset", "mnist"] if explicit_dataset else []))
    assert f"{tmp_path / 'mnist'} is a file, not a folder" in line


@pytest.mark.parametrize("content", ["empty", "corrupt", "partial"])
def test_an_explicit_data_dir_never_falls_back_to_mnist_mini(capsys, tmp_path, content):
    real = Path(os.environ.get("TINYTRAIN_DATA", "/nonexistent")) / "mnist" / MNIST_FILES[0]
    if content == "partial" and not real.is_file():
        pytest.skip("needs full MNIST in $TINYTRAIN_DATA")
    if content != "empty":
        (tmp_path / "mnist").mkdir()
        payload = b"junk" if content == "corrupt" else real.read_bytes()
        (tmp_path / "mnist" / MNIST_FILES[0]).write_bytes(payload)
    line = usage_error(capsys, [*SGD, "--data-dir", str(tmp_path), "--no-download"])
    assert line.startswith("python -m tinytrain.train: error: MNIST: ")  # no --dataset given
    line = usage_error(capsys, [*SGD, "--data-dir", str(tmp_path), "--no-download",
                                "--dataset", "mnist"])
    assert line.startswith("python -m tinytrain.train: error: --dataset mnist: ")


def test_broken_data_in_the_default_root_does_not_fall_back(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TINYTRAIN_DATA", str(tmp_path))
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / MNIST_FILES[0]).write_bytes(b"junk")
    line = usage_error(capsys, [*SGD, "--no-download"])
    assert "corrupt" in line and MNIST_FILES[0] in line


# --------------------------------------------------------------------- 13: fuzzing every flag


class _Trained(Exception):
    """Raised where training would start: the flags were accepted."""


FUZZ = ["", " ", "nan", "-1", "0", "0.5", "1e999", "-inf", "abc", "/", "/dev/null", "/proc",
        "x" * 300, "~", ".png", "ü.PNG", "99999999999999999999999", "--", "-"]


@pytest.mark.parametrize("flag", ["--model", "--dataset", "--data-dir", "--device",
                                  "--batch-size", "--epochs", "--lr", "--schedule",
                                  "--optimizer", "--momentum", "--seed", "--preset", "--save",
                                  "--resume", "--log-every", "--plot", "--eval-batch-size"])
def test_fuzz_every_flag_is_accepted_or_one_line_exit_2(flag, monkeypatch, capsys, tmp_path):
    def trained(*a, **k):
        raise _Trained

    monkeypatch.setattr(train_mod, "train_one_epoch", trained)
    monkeypatch.chdir(tmp_path)  # relative --save / --plot names land here
    base = ["--no-download"] if flag in ("--model", "--dataset") else \
        ["--model", "mlp", "--dataset", "mnist-mini", "--no-download"]
    for value in FUZZ:
        capsys.readouterr()
        try:
            code = main([*base, f"{flag}={value}"])
        except _Trained:
            continue
        err = capsys.readouterr().err
        assert code == 2, (value, err)
        error_line(err)


def test_a_corrupt_file_that_cannot_be_fetched_again_is_called_corrupt(capsys, tmp_path,
                                                                        monkeypatch):
    """With downloads on (the default), a damaged file is fetched again; when that fails, the
    error says the file is there but damaged, not that it is missing."""
    from tinytrain.data import MNIST

    monkeypatch.setattr(MNIST, "mirrors", ((tmp_path / "nowhere").as_uri() + "/",))
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / MNIST_FILES[0]).write_bytes(b"junk")
    assert main([*SGD, "--data-dir", str(tmp_path)]) == 2
    notice, line = capsys.readouterr().err.strip().splitlines()  # "downloading it again"
    assert "wrong checksum, downloading it again" in notice
    assert f"{tmp_path / 'mnist' / MNIST_FILES[0]} is corrupt or incomplete" in line
    assert "could not be downloaded" in line and "is not in" not in line


def test_a_torchrun_launch_is_refused_instead_of_training_each_process_alone(
        capsys, monkeypatch):
    """torchrun sets WORLD_SIZE/RANK but no MPI connects its processes: each trained alone
    on the whole data set and wrote the same checkpoint, silently."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    for var in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(var, raising=False)
    line = usage_error(capsys, [*SGD, *MINI])
    assert "WORLD_SIZE=2" in line and "--nproc 2" in line
