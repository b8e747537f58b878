"""Andrej Karpathy's GPTs, ported by their imports, run with tinytrain and with PyTorch on the
same data and the same random numbers, and what porting them found.

Programs (whole files in ``tests/tutorials/``, each changed line marked ``# tinytrain:``):
minGPT's ``mingpt/model.py``, ``trainer.py`` and ``utils.py`` (as ``mingpt_*.py``, written
as the package ``mingpt/`` next to the projects), with its two projects ``adder`` (a GPT
learns to add digits) and ``chargpt`` (a character-level language model), run through their
own config system (``--trainer.max_iters=11 --model.n_layer=2 ...``); and the "Let's build
GPT" lecture's ``bigram.py`` and ``gpt.py`` (karpathy/ng-video-lecture), with their
hyperparameters made smaller. minGPT's ``from_pretrained`` (GPT-2's weights through the
transformers package) and ``bpe.py`` (which downloads OpenAI's encoder files) are not run.

The runs replay tinytrain's random draws in PyTorch (``Draws`` of tests/test_ports9.py),
here also the stream of a ``RandomSampler(replacement=True)``, which tests/test_ports9.py
leaves to each library. The default dtype is float64 in both runs: losses, greedy answers
and the trained parameters compare to 1e-9.

Porting found: ``torch.utils.data.dataloader`` (and ``.dataset``, ``.sampler``) missing as
modules; a ``RandomSampler(ds, replacement=True, num_samples=int(1e10))`` (minGPT's endless
stream of batches) drawing all 10**10 indices at once (75 GiB: a MemoryError) where PyTorch
draws them as they are used; and ``pin_memory=True`` without a GPU not warning as PyTorch's
DataLoader does on each ``iter()``. Each has a test against PyTorch below.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
import test_ports9
import torch
from test_ports9 import DROPOUTS, Draws, _diff, _same_but_for_rounding, numbers, run_both
from test_tutorials import tutorial_module

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")

MINGPT = {"mingpt/__init__.py": b"", "mingpt/model.py": tutorial_module("mingpt_model.py"),
          "mingpt/trainer.py": tutorial_module("mingpt_trainer.py"),
          "mingpt/utils.py": tutorial_module("mingpt_utils.py")}


class SamplingDraws(Draws):
    """``Draws`` that also replays the index stream of a ``RandomSampler`` with replacement
    (minGPT's trainer), chunk by chunk as tinytrain drew it, and checks each replayed
    ``multinomial`` sample against PyTorch's probabilities: a token PyTorch gives probability
    0 (outside generate()'s ``top_k``) must not have been drawn. ``last`` is the latest."""

    last: SamplingDraws | None = None

    def __init__(self) -> None:
        super().__init__()
        SamplingDraws.last = self
        self.checked = 0  # multinomial samples checked against PyTorch's probabilities

    def record(self, monkeypatch) -> None:
        F = tt.nn.functional
        real = {name: getattr(F, name) for name in DROPOUTS if hasattr(F, name)}
        super().record(monkeypatch)
        for name, dropout in real.items():  # the exact masks, also where the input is 0
            monkeypatch.setattr(F, name, self._exact_mask(name, dropout, getattr(F, name)))
        real_chunks = tt.utils.data.RandomSampler.chunks

        def chunks(sampler):
            for chunk in real_chunks(sampler):
                if sampler.replacement:
                    self.values.append(("sample", np.array(chunk)))
                yield chunk
        monkeypatch.setattr(tt.utils.data.RandomSampler, "chunks", chunks)

    def _exact_mask(self, name, dropout, recording):
        """``recording`` (Draws', which sees the mask where the output is not 0) that records
        the whole mask when the input has zeros: where minGPT's attention dropout zeroes a
        whole row, the residual dropout after it gets zeros (the projection's bias starts at
        0), and PyTorch's gradient there is the mask's. The mask is drawn once more from the
        same state, on an input without zeros."""
        def exact(x, *args, **kwargs):
            training = kwargs.get("training", args[1] if len(args) > 1 else True)
            if not training or not (x == 0).any().item():
                return recording(x, *args, **kwargs)
            state = tt.get_rng_state()
            probe = dropout(tt.where(x == 0, 1.0, x).detach(), *args, **kwargs)
            tt.set_rng_state(state)
            out = recording(x, *args, **kwargs)
            assert self.values[-1][0] == name
            self.values[-1] = (name, probe.numpy() != 0)
            return out
        return exact

    def replay(self, monkeypatch) -> None:
        super().replay(monkeypatch)
        permuted = torch.utils.data.RandomSampler.__iter__

        def sampler_iter(sampler):
            if not sampler.replacement:
                return permuted(sampler)
            return self._samples(sampler.num_samples)
        monkeypatch.setattr(torch.utils.data.RandomSampler, "__iter__", sampler_iter)
        replaying = torch.multinomial

        def multinomial(probs, num_samples, *args, **kwargs):
            out = replaying(probs, num_samples, *args, **kwargs)
            assert (torch.gather(probs, -1, out) > 0).all(), "a token of probability 0"
            self.checked += out.numel()
            return out
        monkeypatch.setattr(torch, "multinomial", multinomial)

    def _samples(self, n: int):
        count = 0
        while count < n:  # (a chunk is taken when the loader asks for its first index)
            assert self.replayed < len(self.values), "sampler: tinytrain drew less"
            was, value = self.values[self.replayed]
            self.replayed += 1
            assert was == "sample", was
            count += len(value)
            yield from value.tolist()


def run_sampling(name, tmp_path, monkeypatch, capsys, **kwargs):
    """``run_both`` with :class:`SamplingDraws`: ``(runs, draws)``."""
    monkeypatch.setattr(test_ports9, "Draws", SamplingDraws)
    runs = run_both(name, tmp_path, monkeypatch, capsys, **kwargs)
    return runs, SamplingDraws.last


def made_up_play(lines: int = 260) -> bytes:
    """A made-up ``input.txt`` (the lectures' tiny Shakespeare, about 6 KB of it): verse of
    a small vocabulary, with every character of chargpt's prompt "O God, O God!"."""
    rng = np.random.default_rng(11)
    words = ("o god the king and queen of all my love thou art fair sweet night day what is "
             "this life but a dream come hither good friend speak now my lord i pray you "
             "sir").split()
    out = ["O God, O God!"]
    for _ in range(lines):
        line = " ".join(rng.choice(words) for _ in range(rng.integers(3, 9)))
        out.append(line.capitalize() + rng.choice([".", ",", "!", "?", ";", ":"]))
    return ("\n".join(out) + "\n").encode()


def _without_times(text: str) -> str:
    """An output without minGPT's timings (``iter_dt 12.34ms``) and the path of the program
    (``sys.argv[0]``, which differs between the two runs' directories)."""
    return re.sub(r"iter_dt [\d.]+ms", "iter_dt (time)", text)


def _same_parameters(ours, theirs, rtol=1e-9, atol=1e-12) -> None:
    names = [n for n, _ in ours.named_parameters()]
    assert names == [n for n, _ in theirs.named_parameters()]
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert p.dtype == tt.float64 and q.dtype == torch.float64, name
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=name)


def _same_state_files(ours, theirs, rtol=1e-9, atol=1e-12) -> None:
    a, b = tt.load(ours), torch.load(theirs, weights_only=True)
    assert list(a) == list(b)
    for name in a:
        assert tuple(a[name].shape) == tuple(b[name].shape), name
        np.testing.assert_allclose(a[name].numpy(), b[name].numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


def _optimizer_groups(optimizer, model) -> list[tuple[list[str], dict]]:
    """The param groups of minGPT's configure_optimizers: each group's parameter names, and
    its options."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [([names[id(p)] for p in g["params"]],
             {k: v for k, v in g.items() if k in ("lr", "betas", "eps", "weight_decay",
                                                  "amsgrad")}) for g in optimizer.param_groups]


# ------------------------------------------------------------------ minGPT


def test_mingpt_chargpt(tmp_path, monkeypatch, capsys):
    """minGPT's chargpt project on a made-up play: its CfgNode config from argv (``--model.
    model_type=None`` and a 2-layer GPT), ``setup_logging``, the Trainer's endless
    ``RandomSampler(replacement=True, num_samples=int(1e10))`` DataLoader with
    ``pin_memory=True``, ``set_callback('on_batch_end', ...)``, configure_optimizers'
    weight-decay groups (``named_modules`` x ``named_parameters``, AdamW with betas), the
    hand-written GELU, ``masked_fill`` from the registered ``bias`` buffer, ``clip_grad_norm_``,
    and at iteration 0 a 100-character (was 500) ``generate(do_sample=True, top_k=10)``; then
    ``torch.save(model.state_dict())``. Float64: the same losses, text and weights."""
    argv = ["--trainer.max_iters=11", "--trainer.num_workers=0", "--trainer.batch_size=4",
            "--data.block_size=16", "--model.model_type=None", "--model.n_layer=2",
            "--model.n_head=2", "--model.n_embd=16"]
    runs, draws = run_sampling("mingpt_chargpt.py", tmp_path, monkeypatch, capsys,
                               files={**MINGPT, "input.txt": made_up_play()}, argv=argv,
                               dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    ours, theirs = _without_times(ours), _without_times(theirs)
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-9)
    assert "command line overwriting config attribute model.model_type with None" in ours
    assert re.search(r"^data has \d{4} characters, \d\d unique\.$", ours, re.M)
    assert "number of parameters: 0.01M" in ours
    assert "running on device cpu" in ours and ours.count("saving model") == 1
    losses = [float(x) for x in re.findall(r"train loss ([\d.]+)", ours)]
    assert len(losses) == 2 and losses[1] < losses[0], losses  # iterations 0 and 10
    completion = re.search(r"iter 0: train loss [\d.]+\n(.*)\nsaving model", ours, re.S)[1]
    assert completion.startswith("O God, O God!") and len(completion) == 13 + 100
    assert draws.checked == 100  # each sampled character had probability > 0 in PyTorch
    trainer, model = v["trainer"], v["model"]
    assert trainer.iter_num == 11 and trainer.loss.dtype == tt.float64
    ours_groups = _optimizer_groups(trainer.optimizer, model)
    assert ours_groups == _optimizer_groups(w["trainer"].optimizer, w["model"])
    (decay, options), (no_decay, no_options) = ours_groups
    assert options["weight_decay"] == 0.1 and no_options["weight_decay"] == 0.0
    assert options["betas"] == (0.9, 0.95) and options["lr"] == 5e-4
    assert "lm_head.weight" in decay and "transformer.wte.weight" in no_decay
    assert decay == sorted(decay) and all(n.endswith("bias") or "ln_" in n or "wte" in n
                                          or "wpe" in n for n in no_decay)
    _same_parameters(model, w["model"])
    _same_state_files(tmp_path / "tinytrain" / "out/chargpt/model.pt",
                      tmp_path / "torch" / "out/chargpt/model.pt")
    assert "transformer.h.0.attn.bias" in tt.load(tmp_path / "tinytrain/out/chargpt/model.pt")
    configs = [json.loads((tmp_path / lib / "out/chargpt/config.json").read_text())
               for lib in ("tinytrain", "torch")]
    assert configs[0] == configs[1] and configs[0]["model"]["n_layer"] == 2


def test_mingpt_adder(tmp_path, monkeypatch, capsys):
    """minGPT's adder project with one-digit numbers: ``torch.randperm(num, generator=rng)``
    splits the problems, ``y[:ndigit*2-1] = -1`` masks the loss (``cross_entropy(...,
    ignore_index=-1)``), and at iteration 0 eval_split decodes greedy ``generate(...,
    do_sample=False)`` answers (``topk``) with ``flip(1)`` and digit factors, compares them
    (``(d3i_pred == d3i_gt).cpu()``), prints its mistakes through ``%d`` of 0-d tensors, and
    saves the model when ``score > top_score`` (a 0-d tensor against a Python int). Float64:
    the same losses, the same mistakes, the same weights."""
    argv = ["--data.ndigit=1", "--trainer.max_iters=21", "--trainer.num_workers=0",
            "--trainer.batch_size=16"]
    runs, draws = run_sampling("mingpt_adder.py", tmp_path, monkeypatch, capsys,
                               files=MINGPT, argv=argv, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    ours, theirs = _without_times(ours), _without_times(theirs)
    assert ours == theirs, _diff(ours, theirs)
    claims = re.findall(r"^GPT claims that (\d) \+ (\d) = (\d+) but gt is (\d+)$", ours, re.M)
    assert len(claims) == 10 and all(int(a) + int(b) == int(gt) for a, b, _, gt in claims)
    scores = re.findall(r"^(train|test) final score: (\d+)/(\d+) = ([\d.]+)% correct$", ours,
                        re.M)
    assert [(s, int(n)) for s, _, n, _ in scores] == [("train", 80), ("test", 20)]
    assert re.search(r"^saving model with new top score of \d+\.0$", ours, re.M)
    losses = [float(x) for x in re.findall(r"train loss ([\d.]+)", ours)]
    assert len(losses) == 3 and losses[-1] < losses[0] - 0.2, losses  # ln 10: 2.30
    assert v["train_dataset"].ixes.tolist() == w["train_dataset"].ixes.tolist()
    assert v["top_score"].ndim == 0 and v["top_score"].item() == w["top_score"].item()
    _same_parameters(v["model"], w["model"])
    _same_state_files(tmp_path / "tinytrain/out/adder/model.pt",
                      tmp_path / "torch/out/adder/model.pt")
    assert draws.checked == 0  # greedy: topk, no sampling


# ------------------------------------------------------------------ "Let's build GPT"


def test_gpt_lecture_bigram(tmp_path, monkeypatch, capsys):
    """The lecture's bigram model: ``torch.randint`` batches stacked from slices of the
    encoded text, ``estimate_loss`` under ``@torch.no_grad()`` into ``torch.zeros(eval_iters)``
    by ``losses[k] = loss.item()``, printed through ``f"{losses['train']:.4f}"`` (a 0-d
    tensor's format), AdamW, and 200 characters (was 500) from ``multinomial``: the same
    printout."""
    runs, draws = run_sampling("gptlecture_bigram.py", tmp_path, monkeypatch, capsys,
                               files={"input.txt": made_up_play()}, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert ours == theirs, _diff(ours, theirs)
    steps = re.findall(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)$", ours, re.M)
    assert [int(s) for s, _, _ in steps] == [0, 40, 80]
    assert float(steps[-1][1]) < float(steps[0][1]) - 0.5, steps  # it learns the bigrams
    assert draws.checked == 200
    _same_parameters(v["model"], w["model"])


def test_gpt_lecture_gpt(tmp_path, monkeypatch, capsys):
    """The lecture's GPT: heads with ``register_buffer('tril', ...)`` and ``masked_fill``,
    ``k.shape[-1]**-0.5``, ``torch.cat`` of the heads, ReLU feed-forward, LayerNorms, the
    ``_init_weights`` of ``self.apply``, dropout (its masks replayed), ``torch.arange(T,
    device=device)`` positions, ``idx[:, -block_size:]`` in generate. Float64: the same
    printout, the same weights."""
    runs, draws = run_sampling("gptlecture_gpt.py", tmp_path, monkeypatch, capsys,
                               files={"input.txt": made_up_play()}, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert ours == theirs, _diff(ours, theirs)
    assert ours.startswith("0.0") and " M parameters\n" in ours
    steps = re.findall(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)$", ours, re.M)
    assert [int(s) for s, _, _ in steps] == [0, 15, 29]
    assert float(steps[-1][1]) < float(steps[0][1]) - 0.2, steps
    assert draws.checked == 60
    _same_parameters(v["model"], w["model"])


# ------------------------------------------------------------------ what porting found


@pytest.mark.parametrize("module", ["dataloader", "dataset", "sampler"])
def test_torch_utils_data_submodules(module):
    """``from torch.utils.data.dataloader import DataLoader`` (minGPT's trainer and projects)
    and the other two modules PyTorch defines its data classes in: tinytrain's have the names
    of PyTorch's ``__all__`` that tinytrain has (StackDataset is not in tinytrain), as
    attributes of ``tinytrain.utils.data`` too, and a name it lacks is an ImportError."""
    import importlib

    ours = importlib.import_module(f"tinytrain.utils.data.{module}")
    theirs = importlib.import_module(f"torch.utils.data.{module}")
    assert getattr(tt.utils.data, module) is ours
    assert set(ours.__all__) == set(theirs.__all__) - {"StackDataset"}
    for name in ours.__all__:
        assert getattr(ours, name) is getattr(tt.utils.data, name), name
    with pytest.raises(AttributeError, match=f"tinytrain.utils.data.{module}' has no attribute"):
        ours.NoSuchThing  # noqa: B018
    if module == "dataset":
        with pytest.raises(ImportError):
            from tinytrain.utils.data.dataset import StackDataset  # noqa: F401


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
def test_random_sampler_of_1e10_samples_draws_as_it_goes(lib):
    """minGPT's ``RandomSampler(ds, replacement=True, num_samples=int(1e10))``: the
    sampler and a DataLoader over it give indices as they are asked for, at once and in
    little memory (tinytrain drew all 10**10 first: a MemoryError of 75 GiB); the length is
    the number asked for, and each iter() is a new stream."""
    data = lib.utils.data
    ds = data.TensorDataset(lib.arange(10))
    sampler = data.RandomSampler(ds, replacement=True, num_samples=int(1e10))
    assert len(sampler) == 10**10
    first = [i for i, _ in zip(iter(sampler), range(100_000))]  # past a chunk of 65536
    assert all(0 <= i < 10 for i in first) and set(first) == set(range(10))
    loader = data.DataLoader(ds, sampler=sampler, batch_size=64)
    assert len(loader) == -(-10**10 // 64)
    batches = iter(loader)
    xs = np.concatenate([next(batches)[0].numpy() for _ in range(1500)])  # 96,000
    assert xs.shape == (96_000,) and set(xs.tolist()) == set(range(10))
    counts = np.bincount(xs, minlength=10)
    assert counts.min() > 9000, counts  # uniform: 9,600 each
    if lib is tt:
        runs = []
        for _ in range(2):
            tt.manual_seed(3)
            batches = iter(loader)
            runs.append(np.concatenate([next(batches)[0].numpy() for _ in range(1100)]))
        np.testing.assert_array_equal(*runs)  # reproducible, across chunks


def test_random_sampler_chunks_are_its_indices():
    """tinytrain's ``RandomSampler.chunks()`` (the epoch as drawn, a piece at a time) are
    ``indices()`` cut up: the same numbers from the same seed, with or without replacement,
    for an epoch shorter or longer than a chunk or a permutation; the DataLoader's batches
    of a long epoch are those numbers in order, the last batch shorter (or dropped)."""
    from tinytrain.data.sampler import CHUNK

    for replacement, count in ((True, 1000), (True, 2 * CHUNK + 5), (False, 25), (False, 7)):
        def sampler(replacement=replacement, count=count):
            return tt.utils.data.RandomSampler(range(10), replacement, count, seed=5)
        whole = sampler().indices()
        pieces = list(sampler().chunks())
        assert whole.dtype == np.int64 and len(whole) == count
        np.testing.assert_array_equal(np.concatenate(pieces), whole)
        np.testing.assert_array_equal(list(sampler()), whole)  # iter() of the sampler
        if not replacement:  # permutations one after another, the last cut short
            assert [len(p) for p in pieces] == [10] * (count // 10) + [count % 10] * (
                count % 10 > 0)
            assert count < 10 or sorted(pieces[0].tolist()) == list(range(10))
    ds = tt.utils.data.TensorDataset(tt.arange(10))
    for drop_last in (False, True):
        s = tt.utils.data.RandomSampler(ds, True, 2 * CHUNK + 5, seed=9)
        loader = tt.utils.data.DataLoader(ds, sampler=s, batch_size=1000, drop_last=drop_last)
        got = [x.numpy() for (x,) in loader]
        expected = tt.utils.data.RandomSampler(ds, True, 2 * CHUNK + 5, seed=9).indices()
        assert len(got) == len(loader) == (131 if drop_last else 132)
        assert [len(g) for g in got[-2:]] == ([1000, 1000] if drop_last else [1000, 77])
        np.testing.assert_array_equal(np.concatenate(got), expected[:len(got) * 1000])


def test_a_sampler_subclass_with_its_own_indices_keeps_them():
    """A subclass of RandomSampler that overrides ``indices()`` (tinytrain's way of giving an
    epoch) is iterated, and loaded, by its own ``indices()``, not by the ``chunks()`` it
    inherits."""
    class Reversed(tt.utils.data.RandomSampler):
        def indices(self):
            return np.arange(len(self.data_source))[::-1].copy()

    ds = tt.utils.data.TensorDataset(tt.arange(5))
    assert list(Reversed(ds)) == [4, 3, 2, 1, 0]
    loader = tt.utils.data.DataLoader(ds, sampler=Reversed(ds), batch_size=2)
    assert [x.tolist() for (x,) in loader] == [[4, 3], [2, 1], [0]]


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
def test_pin_memory_without_a_gpu_warns_on_each_iter(lib):
    """PyTorch's DataLoader with ``pin_memory=True`` and no accelerator warns on every
    ``iter()`` that no memory will be pinned (minGPT's trainer asks for it), and not without
    pin_memory; tinytrain, which never pins, warns the same."""
    if lib.accelerator.is_available():
        pytest.skip("a GPU: memory can be pinned")
    ds = lib.utils.data.TensorDataset(lib.arange(4))
    loader = lib.utils.data.DataLoader(ds, batch_size=2, pin_memory=True)
    for _ in range(2):
        with pytest.warns(UserWarning, match=r"^'pin_memory' argument is set as true but no "
                          r"accelerator is found, then device pinned memory won't be used\.$"):
            it = iter(loader)
        assert [x.tolist() for (x,) in it] == [[0, 1], [2, 3]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(lib.utils.data.DataLoader(ds, batch_size=2))) == 2
