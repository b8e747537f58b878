"""Real PyTorch client programs ported by their imports, run with tinytrain and with PyTorch
on the same data and the same random numbers, and what porting them found.

Programs (whole scripts in ``tests/tutorials/``, each line that differs from the original
marked ``# tinytrain:``, see tests/test_tutorials.py): Andrej Karpathy's makemore lectures 1-5
(bigram counts, the neural bigram, the MLP, batch norm by hand, backprop by hand, the
WaveNet), PyTorch's "Learn the basics" pages not ported before (tensors, data, build model,
autograd, optimization, save and load), the "NLP from scratch" char-RNN classification and
generation tutorials, and the spatial transformer networks tutorial.

The two libraries' random generators differ (tinytrain's is NumPy's PCG64), so a run with
PyTorch *replays* tinytrain's draws: :class:`Draws` records every value tinytrain's random
functions, ``nn.init`` functions and dropouts gave, and PyTorch's same calls (made for real,
so their arguments are checked and their shapes and dtypes compared) return those values.
With the same numbers the two runs compare tightly: float64 where the program's tensors
follow the default dtype (the test sets it for both), float32 otherwise.
"""

from __future__ import annotations

import collections
import contextlib
import re
import sys
import warnings

import numpy as np
import pytest
import torch
from test_tutorials import TUTORIALS, run

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")  # (two threads: 5x slower here)

#: The random functions a program may call, by name in both libraries' top modules.
RANDOM_FUNCTIONS = ("rand", "randn", "randint", "randperm", "multinomial", "rand_like",
                    "randn_like", "randint_like", "normal", "bernoulli")
#: ``nn.init``'s random fillers (the modules' constructors call them in torch's order).
RANDOM_INITS = ("uniform_", "normal_", "kaiming_uniform_", "kaiming_normal_",
                "xavier_uniform_", "xavier_normal_", "trunc_normal_", "orthogonal_")
#: Functional dropouts: the mask is what is replayed.
DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d")


class Draws:
    """The random values of one tinytrain run, in the order they were drawn, to replay in a
    PyTorch run of the same program (see the module docstring): the program's own calls of
    the random functions, the ``nn.init`` fillers and dropouts of the layers, and the
    permutations of shuffling samplers and ``random_split`` (a library's other internal
    draws are each library's own)."""

    def __init__(self) -> None:
        self.values: list[tuple[str, np.ndarray]] = []
        self.depth = 0  # an init that calls another init records once, the outer one
        self.replayed = 0

    @contextlib.contextmanager
    def _outermost(self):
        self.depth += 1
        try:
            yield self.depth == 1
        finally:
            self.depth -= 1

    def _patch(self, monkeypatch, lib, wrap) -> None:
        for name in RANDOM_FUNCTIONS:  # the program's own calls: a library's internal ones
            if hasattr(tt, name):     # (a shuffling sampler's) draw as they do
                real = getattr(lib, name)
                monkeypatch.setattr(lib, name, _from_the_program(lib, real, wrap(
                    name, real, "function")))
        for name in RANDOM_INITS:
            monkeypatch.setattr(lib.nn.init, name, wrap(name, getattr(lib.nn.init, name), "init"))
        F = lib.nn.functional
        for name in DROPOUTS:
            if hasattr(tt.nn.functional, name):
                monkeypatch.setattr(F, name, wrap(name, getattr(F, name), "dropout"))

    def record(self, monkeypatch) -> None:
        """Patch tinytrain so that its random draws are kept."""
        def wrap(name, real, kind):
            def recording(*args, **kwargs):
                with self._outermost() as outer:
                    out = real(*args, **kwargs)
                    if not outer:
                        return out
                    if kind == "dropout":
                        x = args[0]
                        training = kwargs.get("training", args[2] if len(args) > 2 else True)
                        if not training:
                            return out
                        # kept where the output is not 0; where the input was 0 the mask
                        # is unseen (1 is taken: after a ReLU its gradient is 0 either way)
                        self.values.append((name, (out.detach().numpy() != 0)
                                            | (x.detach().numpy() == 0)))
                    else:
                        self.values.append((name, np.array(out.detach().numpy())))
                    return out
            return recording
        self._patch(monkeypatch, tt, wrap)
        real_indices = tt.utils.data.RandomSampler.indices

        def indices(sampler):  # a shuffling DataLoader's epoch, random_split's permutation
            out = real_indices(sampler)
            if not sampler.replacement:
                self.values.append(("permutation", np.array(out)))
            return out
        monkeypatch.setattr(tt.utils.data.RandomSampler, "indices", indices)

    def _permutation(self, n: int) -> list[int]:
        assert self.replayed < len(self.values), "permutation: tinytrain drew less"
        was, value = self.values[self.replayed]
        self.replayed += 1
        assert was == "permutation" and len(value) == n, (was, value.shape, n)
        return value.tolist()

    def replay(self, monkeypatch) -> None:
        """Patch PyTorch so that its random calls give the recorded values."""
        def wrap(name, real, kind):
            def replaying(*args, **kwargs):
                with self._outermost() as outer:
                    out = real(*args, **kwargs)
                if not outer or (kind == "dropout" and not kwargs.get(
                        "training", args[2] if len(args) > 2 else True)):
                    return out
                assert self.replayed < len(self.values), f"{name}: tinytrain drew less"
                was, value = self.values[self.replayed]
                self.replayed += 1
                assert was == name and tuple(out.shape) == value.shape, (name, was, value.shape)
                if kind == "dropout":
                    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
                    return args[0] * torch.from_numpy(value) / (1 - p)
                assert str(out.dtype).removeprefix("torch.") == value.dtype.name, (name, out)
                with torch.no_grad():
                    out.copy_(torch.from_numpy(value))
                return out
            return replaying
        self._patch(monkeypatch, torch, wrap)
        real_iter = torch.utils.data.RandomSampler.__iter__

        def sampler_iter(sampler):
            if sampler.replacement:
                return real_iter(sampler)
            return iter(self._permutation(sampler.num_samples))
        monkeypatch.setattr(torch.utils.data.RandomSampler, "__iter__", sampler_iter)
        monkeypatch.setattr(torch.utils.data.dataset, "randperm",  # random_split's
                            lambda n, generator=None: torch.tensor(self._permutation(n)))

    def all_replayed(self) -> bool:
        return self.replayed == len(self.values)


def _from_the_program(lib, real, wrapped):
    """``wrapped`` when the caller is not ``lib``'s own code, else ``real``."""
    def call(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        inside = caller.split(".")[0] == lib.__name__
        return (real if inside else wrapped)(*args, **kwargs)
    return call


def names_txt(n: int = 320) -> bytes:
    """A made-up ``names.txt`` for makemore: ``n`` names of one to three syllables, one a
    line, using all 26 letters (the lectures' vocabulary of 27 with '.'); the first five are
    the real file's (lecture 1 hard-codes the five bigrams of "emma")."""
    rng = np.random.default_rng(9)
    onsets = ["", "b", "br", "c", "ch", "d", "em", "f", "g", "h", "j", "k", "l", "m", "n",
              "p", "r", "s", "sh", "t", "v", "w", "z", "kr", "st"]
    vowels = ["a", "e", "i", "o", "u", "ia", "ai", "y", "ee", "ou"]
    codas = ["", "", "n", "l", "r", "s", "h", "th", "x", "q", "ng"]
    names = ["emma", "olivia", "ava", "isabella", "sophia"]
    for _ in range(n - len(names)):
        names.append("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                             for _ in range(rng.integers(1, 4))))
    assert len(set("".join(names))) == 26
    return "\n".join(names).encode() + b"\n"


def run_both(name, tmp_path, monkeypatch, capsys, files=None, argv=(), dtype=None):
    """Run tutorial ``name`` with tinytrain (its draws recorded), then with PyTorch (replaying
    them), under default dtype ``dtype`` when given: ``{lib: (output, globals, plots)}``
    (``plots``: the pyplot calls ``matplotlib_shim`` recorded). Both runs must warn alike."""
    draws, results, warned = Draws(), {}, {}
    monkeypatch.syspath_prepend(str(TUTORIALS))
    import matplotlib_shim

    for lib in ("tinytrain", "torch"):
        matplotlib_shim.calls.clear()
        with monkeypatch.context() as patches:
            (draws.record if lib == "tinytrain" else draws.replay)(patches)
            module = tt if lib == "tinytrain" else torch
            before = module.get_default_dtype()
            if dtype is not None:
                module.set_default_dtype(getattr(module, dtype))
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    results[lib] = (*run(name, lib, tmp_path, patches, capsys, argv, files),
                                    list(matplotlib_shim.calls))
                # (open('names.txt').read(): the file is closed by the garbage collector;
                # tinytrain's DataLoader makes no worker processes to warn about: README)
                warned[lib] = [(w.category, re.sub(r" \(Triggered internally at .*", "",
                                                   str(w.message), flags=re.S))
                               for w in caught if w.category is not ResourceWarning
                               and not str(w.message).startswith("This DataLoader will create")]
            finally:
                module.set_default_dtype(before)
    assert draws.all_replayed(), (draws.replayed, len(draws.values))
    assert warned["tinytrain"] == warned["torch"], _counted(warned)  # the same, as many times
    return results


def _counted(warned: dict) -> dict:
    return {lib: collections.Counter(m[:60] for _, m in ws) for lib, ws in warned.items()}


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", text)]


# ------------------------------------------------------------------ makemore


def test_makemore_part1_bigrams(tmp_path, monkeypatch, capsys):
    """Counts in an int32 table (``N[ix1, ix2] += 1``), ``P /= P.sum(1, keepdims=True)``,
    sampling by ``multinomial`` from a seeded Generator, the log likelihood; then the neural
    bigram: ``F.one_hot(xs).float() @ W``, ``W.grad = None``, ``W.data += -50 * W.grad``."""
    runs = run_both("makemore_part1_bigrams.py", tmp_path, monkeypatch, capsys,
                    files={"names.txt": names_txt()})
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    np.testing.assert_array_equal(v["N"].numpy(), w["N"].numpy())
    assert v["N"].dtype == tt.int32 and v["N"].sum().item() == w["n"]
    np.testing.assert_allclose(v["P"].numpy(), w["P"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-5, atol=1e-6)
    losses = [float(x) for x in re.findall(r"^(\d\.\d+)$", ours, re.M)]
    counting, one_step, descent = losses[0], losses[1], losses[2:]  # nll / n, then losses
    assert len(descent) == 100 and one_step > 3, losses
    # gradient descent approaches the counting model's loss (the lecture's point)
    assert descent[0] > counting + 0.8 and descent[-1] < counting + 0.15, (counting, descent)
    assert _same_but_for_rounding(ours, theirs)  # float32: printed to the last digits
    np.testing.assert_allclose(v["W"].detach().numpy(), w["W"].detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def _documented(text: str) -> str:
    """An output with README's documented differences taken out: sizes are plain tuples
    (``torch.Size([2, 3])`` prints ``(2, 3)``), dtypes print without ``torch.``, named
    results are ``tinytrain.return_types.max(...)``, and graph nodes have their own names and
    reprs (``grad_fn=<...>``, ``<AddBackward0 object at ...>`` are not compared)."""
    text = text.replace("torch.return_types.", "tinytrain.return_types.")
    text = re.sub(r"torch\.Size\(\[([^\]]*)\]\)",
                  lambda m: str(tuple(int(d) for d in m.group(1).split(",") if d.strip())), text)
    text = re.sub(r"torch\.(float|int|bool|uint)", r"\1", text)
    text = re.sub(r"<\w+ object at 0x[\da-f]+>", "<...>", text)  # print(z.grad_fn)
    return re.sub(r"grad_fn=<\w+>", "grad_fn=<...>", text)


def _same_but_for_rounding(ours: str, theirs: str) -> bool:
    """The outputs are the same but for the last digits of their decimals (and README's
    documented differences)."""
    number = r"[-+]?\d+\.\d+(e[-+]?\d+)?"  # (a mean of 1e-19 prints as +0.000000 or -0.000000)
    return re.sub(number, "X", _documented(ours)) == re.sub(number, "X", _documented(theirs))


def _split_loss(lib, forward, X, Y) -> float:
    with lib.no_grad():
        return lib.nn.functional.cross_entropy(forward(X), Y).item()


def test_makemore_part2_mlp(tmp_path, monkeypatch, capsys):
    """Embedding by ``C[X]``, ``emb.view(-1, 30)``, ``torch.randint`` minibatches, a step
    schedule on ``p.data += -lr * p.grad``; then sampling with ``F.softmax`` and a Generator.
    float64 (the default dtype of both runs): the same numbers to 1e-9 after 2000 steps."""
    runs = run_both("makemore_part2_mlp.py", tmp_path, monkeypatch, capsys,
                    files={"names.txt": names_txt()}, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-9)
    np.testing.assert_allclose(v["lossi"], w["lossi"], rtol=1e-9)
    for a, b in zip(v["parameters"], w["parameters"]):
        assert a.dtype == tt.float64 and b.dtype == torch.float64
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-8, atol=1e-10)
    lossi = np.asarray(v["lossi"])
    assert lossi[:50].mean() > lossi[-200:].mean() + 0.5  # log10 of the loss: it learns
    assert v["Xtr"].shape[1] == 3 and v["Xtr"].dtype == tt.int64
    assert len(re.findall(r"^\(\d+, 3\) \(\d+,\)$", ours, re.M)) == 3  # build_dataset's prints

    def forward(X, C=v["C"], W1=v["W1"], b1=v["b1"], W2=v["W2"], b2=v["b2"]):
        return tt.tanh(C[X].view(-1, 30) @ W1 + b1) @ W2 + b2
    assert _split_loss(tt, forward, v["Xtr"], v["Ytr"]) < 2.6  # ln 27 = 3.3 is chance


def _diff(ours: str, theirs: str) -> list[tuple[str, str]]:
    """The first lines where two outputs differ (an assertion's message)."""
    return [(a, b) for a, b in zip(_documented(ours).splitlines(),
                                   _documented(theirs).splitlines()) if a != b][:5]


def _same_plots(ours, theirs, rtol=1e-9, atol=1e-12) -> None:
    assert [c[0] for c in ours] == [c[0] for c in theirs]
    for (name, a, ka), (_, b, kb) in zip(ours, theirs):
        assert ka == kb and len(a) == len(b), name
        for x, y in zip(a, b):
            if isinstance(x, np.ndarray):
                assert x.shape == y.shape and x.dtype.kind == y.dtype.kind, (name, x, y)
                np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=rtol,
                                           atol=atol, err_msg=name)
            else:
                assert x == y, name


def test_makemore_part3_batchnorm(tmp_path, monkeypatch, capsys):
    """Batch norm by hand (``hpreact.mean(0, keepdim=True)``, ``.std``, running statistics
    under no_grad), a (5/3)/fan_in**0.5 init, ``@torch.no_grad()`` on split_loss; then the
    deeper net of hand-written Linear/BatchNorm1d/Tanh classes with ``retain_grad()`` on each
    layer's output, the update:data ratios and the histograms of activations and gradients
    (``torch.histogram(t, density=True)``, ``(t.abs() > 0.97).float().mean()``, printed by
    '%+.2f' % tensor): all the same numbers as PyTorch's in float64."""
    runs = run_both("makemore_part3_bn.py", tmp_path, monkeypatch, capsys,
                    files={"names.txt": names_txt()}, dtype="float64")
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(v["ud"], w["ud"], rtol=1e-8, atol=1e-12)
    _same_plots(our_plots, their_plots, rtol=1e-7)
    dead = [a[0] for name, a, _ in our_plots if name == "imshow"]
    assert len(dead) == 1 and dead[0].dtype == bool and dead[0].shape == (32, 200)
    train, val = (float(x) for x in re.findall(r"^(?:train|val) ([\d.]+)$", ours, re.M))
    assert train < 2.6 and val < 2.9, ours  # ln 27 = 3.3 is chance
    saturated = [float(x) for x in re.findall(r"saturated: ([\d.]+)%", ours)]
    assert len(saturated) == 5 and max(saturated) < 10, saturated  # batch norm: few dead
    for layer, other in zip(v["layers"], w["layers"]):
        np.testing.assert_allclose(layer.out.grad.numpy(), other.out.grad.numpy(), rtol=1e-6,
                                   atol=1e-12)


# ------------------------------------------------------------------ what the programs found


@pytest.mark.parametrize("kwargs", [{}, {"density": True}, {"range": (-1.0, 1.0)}])
def test_histogram_takes_100_bins_by_default_as_torch(kwargs):
    """makemore 3: ``hy, hx = torch.histogram(t, density=True)`` (it raised TypeError)."""
    x = np.random.default_rng(0).standard_normal(500)
    ours, theirs = tt.histogram(tt.tensor(x), **kwargs), torch.histogram(torch.tensor(x),
                                                                         **kwargs)
    assert ours.hist.shape == (100,) and ours.bin_edges.shape == (101,)
    np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.bin_edges.numpy(), theirs.bin_edges.numpy(), rtol=1e-12,
                               atol=1e-15)


CMP = re.compile(r"^(\w+)\s+\| exact: (True |False) \| approximate: (True |False) \| "
                 r"maxdiff: (\S+)$", re.M)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_makemore_part4_manual_backprop(dtype, tmp_path, monkeypatch, capsys):
    """Hand-written gradients of every intermediate compared with ``.grad`` after
    ``retain_grad()`` (``torch.all(dt == t.grad)``, ``torch.allclose``, ``(dt -
    t.grad).abs().max()``), ``logprobs[range(n), Yb]``, ``dC[ix] += demb[k,j]`` with a 0-d index
    tensor, ``F.one_hot(...) * dlogit_maxes``; then training by the manual backward under
    ``no_grad``. The lecture's float32 too: there its manual gradients are exact in PyTorch,
    and must be in tinytrain (the same formulas of the same ops)."""
    runs = run_both("makemore_part4_backprop.py", tmp_path, monkeypatch, capsys,
                    files={"names.txt": names_txt()}, dtype=dtype)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    checks = {lib: CMP.findall(out) for lib, out in (("tinytrain", ours), ("torch", theirs))}
    assert len(checks["tinytrain"]) == 28 and len(checks["torch"]) == 28
    tol = 1e-14 if dtype == "float64" else 1e-6
    for (name, _exact, approx, maxdiff), theirs_check in zip(checks["tinytrain"],
                                                           checks["torch"]):
        assert name == theirs_check[0] and approx.strip() == "True", (name, maxdiff)
        assert float(maxdiff) < tol, (name, maxdiff)
    # exercise 1 is exact in tinytrain (PyTorch's tanh backward rounds differently from
    # (1.0 - h**2) * dh); the one-go formulas of exercises 2 and 3 only approximate
    assert [c[1] for c in checks["tinytrain"]] == ["True "] * 26 + ["False"] * 2
    without = [CMP.sub("", out) for out in (ours, theirs)]
    assert _same_but_for_rounding(*without), _diff(*without)
    rtol = 1e-9 if dtype == "float64" else 2e-4
    np.testing.assert_allclose(v["lossi"], w["lossi"], rtol=rtol)
    assert np.mean(v["lossi"][:20]) > np.mean(v["lossi"][-20:]) + 0.1  # it learns


def test_makemore_part5_wavenet(tmp_path, monkeypatch, capsys):
    """Hand-written Embedding / FlattenConsecutive (``x.view(B, T//n, C*n)``, ``squeeze(1)``)
    / Linear / BatchNorm1d over dims (0, 1) of 3-D input / Sequential classes, seeded by
    ``torch.manual_seed(42)`` (the global stream), eval mode by ``layer.training = False``,
    sampling by ``multinomial`` without a generator; float64."""
    runs = run_both("makemore_part5_cnn1.py", tmp_path, monkeypatch, capsys,
                    files={"names.txt": names_txt()}, dtype="float64")
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-8)
    np.testing.assert_allclose(v["lossi"], w["lossi"], rtol=1e-8)
    _same_plots(our_plots, their_plots, rtol=1e-8)
    shapes = re.findall(r"^(\w+) : (\(.*\))$", ours, re.M)
    assert shapes[:5] == [("Embedding", "(4, 8, 24)"), ("FlattenConsecutive", "(4, 4, 48)"),
                          ("Linear", "(4, 4, 128)"), ("BatchNorm1d", "(4, 4, 128)"),
                          ("Tanh", "(4, 4, 128)")] and shapes[-1] == ("Linear", "(4, 27)")
    assert "tensor(True)" in ours
    bn = v["model"].layers[3]
    assert bn.running_mean.shape == (1, 1, 128)  # the lecture's 3-D running statistics
    train, val = (float(x) for x in re.findall(r"^(?:train|val) ([\d.]+)$", ours, re.M))
    assert train < 2.7 and val < 3.0, ours
    plotted = our_plots[-1][1][0]
    assert plotted.shape == (5,) and plotted[0] > plotted[-1]  # the loss curve descends


@pytest.mark.parametrize("shapes", [((2, 3, 4, 5), (5, 6)), ((3, 4, 5), (5, 6)),
                                    ((4, 5), (5, 6)), ((2, 1, 4, 5), (3, 5, 6))])
def test_matmul_gradients_of_a_sequence_times_a_matrix_match_torch(shapes):
    """The WaveNet's ``x @ self.weight`` on ``[B, T, C]``: the weight's gradient is one
    product over all the rows now (also for a non-contiguous ``x``)."""
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(s) for s in shapes)
    _assert_same_with_grads(lambda x, w: x @ w, [a, b])
    _assert_same_with_grads(lambda x, w: x.transpose(-1, -2).transpose(-1, -2) @ w, [a, b])
    at = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    _assert_same_with_grads(lambda x, w: x.transpose(-1, -2) @ w, [at, b])


def _assert_same_with_grads(fn, arrays) -> None:
    results = []
    for lib in (tt, torch):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(*xs)
        ramp = np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape))
        (out * lib.tensor(ramp)).sum().backward()
        results.append([out.detach().numpy()] + [x.grad.numpy() for x in xs])
    for ours, theirs in zip(*results):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ Learn the basics


def test_basics_tensors(tmp_path, monkeypatch, capsys):
    """Creation from data, NumPy and other tensors (``rand_like(x, dtype=torch.float)``),
    indexing, ``cat``, ``matmul``/``mul`` with ``out=``, ``agg.item()``, in-place ``add_``,
    and the NumPy bridge both ways (``t.add_(1)`` shows in ``t.numpy()``, ``np.add(n, 1,
    out=n)`` in ``from_numpy(n)``): the same printout as PyTorch's."""
    runs = run_both("basics_tensorqs_tutorial.py", tmp_path, monkeypatch, capsys)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _documented(ours) == _documented(theirs), _diff(ours, theirs)
    assert "n: [2. 2. 2. 2. 2.]" in ours
    assert "t: tensor([2., 2., 2., 2., 2.], dtype=float64)" in ours
    assert "12.0 <class 'float'>" in ours
    for name in ("y1", "y2", "y3", "z1", "z2", "z3", "t1", "x_rand"):
        assert v[name].dtype == tt.float32 and str(w[name].dtype) == "torch.float32", name
        np.testing.assert_array_equal(v[name].numpy(), w[name].numpy(), err_msg=name)
    assert v["x_np"].dtype == tt.int64 and v["x_ones"].dtype == tt.int64


def test_basics_autograd(tmp_path, monkeypatch, capsys):
    """``requires_grad=True`` leaves, ``z.grad_fn``, BCE with logits, ``no_grad``,
    ``detach``, and the Jacobian-vector example: ``out.backward(torch.ones_like(out),
    retain_graph=True)`` twice accumulates, ``inp.grad.zero_()`` clears."""
    runs = run_both("basics_autogradqs_tutorial.py", tmp_path, monkeypatch, capsys)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-6)
    assert re.search(r"^Gradient function for z = <AddBackward object at 0x[\da-f]+>$", ours,
                     re.M)  # the node's repr is PyTorch's form (it was "<AddBackward>")
    assert "False\nFalse" in ours and ours.count("True") == 1
    np.testing.assert_array_equal(v["inp"].grad.numpy(), w["inp"].grad.numpy())
    assert "Second call\ntensor([[8., 4., 4., 4., 4.]," in ours


def test_basics_build_model(tmp_path, monkeypatch, capsys):
    """nn.Flatten, nn.Sequential, ``nn.Softmax(dim=1)(logits)``, ``argmax(1)``, the model's
    printout, ``named_parameters()`` with ``param.size()`` and ``param[:2]``: PyTorch's
    printout (the Linear layers' initial weights replayed)."""
    runs = run_both("basics_buildmodel_tutorial.py", tmp_path, monkeypatch, capsys)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-5, atol=1e-6)
    assert "Layer: linear_relu_stack.0.weight | Size: (512, 784) | Values : tensor([[" in ours
    np.testing.assert_allclose(v["pred_probab"].detach().numpy(),
                               w["pred_probab"].detach().numpy(), rtol=1e-5)


def test_basics_optimization(tmp_path, monkeypatch, capsys):
    """train_loop / test_loop with ``model.train()`` / ``model.eval()``, ``size =
    len(dataloader.dataset)``, ``loss.backward(); optimizer.step(); optimizer.zero_grad()``,
    ``(pred.argmax(1) == y).type(torch.float).sum().item()``: the same losses as PyTorch's
    from the same initial weights, and every epoch downhill."""
    runs = run_both("basics_optimization_tutorial.py", tmp_path, monkeypatch, capsys)
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=2e-5)
    tests = [float(x) for x in re.findall(r"Avg loss: ([\d.]+)", ours)]
    assert len(tests) == 3 and tests[0] > tests[1] > tests[2], tests
    assert "[   64/ 1280]" in ours
    for (name, p), (_, q) in zip(v["model"].named_parameters(), w["model"].named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_basics_data(tmp_path, monkeypatch, capsys):
    """``torch.randint(len(training_data), size=(1,))`` picks the images to show, a shuffling
    DataLoader's ``next(iter(...))``, and the tutorial's CustomImageDataset (read_csv and
    decode_image, through the shims) in a DataLoader."""
    runs = run_both("basics_data_tutorial.py", tmp_path, monkeypatch, capsys)
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    assert re.sub(r"Label: .*", "", _documented(ours)) == re.sub(r"Label: .*", "",
                                                                  _documented(theirs))
    assert "Feature batch shape: (64, 1, 28, 28)\nLabels batch shape: (64,)\n" in ours
    _same_plots(our_plots[:28], their_plots[:28])  # the 3 x 3 grid (the batches shuffle apart)
    assert [c[0] for c in our_plots].count("imshow") == 10
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 3, 4, 4), dtype=np.uint8)
    (tmp_path / "img").mkdir()
    lines = []
    for i, image in enumerate(images):
        np.save(tmp_path / "img" / f"{i}.npy", image)
        lines.append(f"{i}.npy,{i % 3}")
    (tmp_path / "labels.csv").write_text("\n".join(lines) + "\n")
    batches = {}
    import torchvision_shim
    for lib, g in (("tinytrain", v), ("torch", w)):
        monkeypatch.setattr(torchvision_shim, "as_tensor",
                            tt.tensor if lib == "tinytrain" else torch.from_numpy)
        ds = g["CustomImageDataset"](str(tmp_path / "labels.csv"), str(tmp_path / "img"),
                                     transform=lambda x: x.float() / 255,
                                     target_transform=lambda y: y * 10)
        batches[lib] = list(g["DataLoader"](ds, batch_size=2))
    assert [len(b) for b in batches["tinytrain"]] == [2, 2, 2]
    for (x, y), (tx, ty) in zip(batches["tinytrain"], batches["torch"]):
        assert x.dtype == tt.float32 and y.dtype == tt.int64 and str(ty.dtype) == "torch.int64"
        np.testing.assert_array_equal(x.numpy(), tx.numpy())
        np.testing.assert_array_equal(y.numpy(), ty.numpy())


def test_basics_save_and_load(tmp_path, monkeypatch, capsys):
    """``torch.save(model.state_dict())``, ``load_state_dict(torch.load(...,
    weights_only=True))`` into a fresh model, ``model.eval()``, and the whole model saved and
    loaded (``weights_only=False``): the "pretrained" weights come back, and the loaded
    model (in eval mode: no dropout) gives PyTorch's outputs."""
    runs = run_both("basics_saveloadrun_tutorial.py", tmp_path, monkeypatch, capsys)
    (_, v, _), (_, w, _) = runs["tinytrain"], runs["torch"]
    ours, theirs = v["model"], w["model"]
    assert type(ours).__module__.startswith("tinytrain") and not ours.training
    assert not any(m.training for m in ours.modules())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, p in ours.state_dict().items():
        np.testing.assert_array_equal(p.numpy(), theirs.state_dict()[name].numpy(), name)
    x = np.random.default_rng(1).random((2, 3, 16, 16), dtype=np.float32)
    with tt.no_grad(), torch.no_grad():
        np.testing.assert_allclose(ours(tt.tensor(x)).numpy(),
                                   theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    state = tt.load(tmp_path / "tinytrain" / "model_weights.pth", weights_only=True)
    assert list(state) == list(theirs.state_dict())


# ------------------------------------------------------------------ NLP from scratch


def names_by_language(n: int = 40) -> dict[str, bytes]:
    """Made-up ``data/names/<Language>.txt`` files for the char-RNN tutorials: ``n``
    capitalised names a language, each language from its own syllables (so they can be told
    apart), some with accents that ``unicodeToAscii`` strips."""
    syllables = {
        "Chinese": (["zh", "ch", "x", "q", "w", "l", "h", "y"], ["ang", "ao", "ei", "ing", "u"]),
        "German": (["sch", "k", "m", "w", "br", "h", "st"], ["ü", "er", "ann", "ei", "ö"]),
        "Italian": (["r", "b", "c", "f", "g", "l", "m"], ["ossi", "ini", "ello", "à", "etti"]),
        "Russian": (["v", "p", "k", "s", "d", "z", "m"], ["ov", "ev", "sky", "in", "enko"]),
        "Spanish": (["g", "r", "m", "d", "l", "s", "j"], ["ez", "ñez", "ado", "ia", "es"]),
    }
    rng = np.random.default_rng(7)
    files = {}
    for language, (onsets, rhymes) in syllables.items():
        names = ["".join(rng.choice(onsets) + rng.choice(rhymes)
                         for _ in range(rng.integers(1, 3))).capitalize() for _ in range(n)]
        files[f"data/names/{language}.txt"] = ("\n".join(names) + "\n").encode()
    return files


def _without_times(text: str) -> str:
    return re.sub(r"\d+m \d+s", "(time)", text)


def test_char_rnn_classification(tmp_path, monkeypatch, capsys):
    """The hand-written RNN module (``torch.cat((input, hidden), 1)`` into i2h / i2o, then
    LogSoftmax), one letter at a time from a one-hot ``lineToTensor``, NLLLoss, the update
    ``p.data.add_(p.grad.data, alpha=-learning_rate)``, ``topk``, a confusion matrix filled
    by ``confusion[i][j] += 1``: the same numbers as PyTorch's in float64."""
    runs = run_both("char_rnn_classification_tutorial.py", tmp_path, monkeypatch, capsys,
                    files=names_by_language(), dtype="float64")
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    ours, theirs = _without_times(ours), _without_times(theirs)
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-9)
    np.testing.assert_allclose(v["all_losses"], w["all_losses"], rtol=1e-9)
    _same_plots(our_plots, their_plots)
    assert "Slusarski" in ours and "(5, 1, 57)" in ours  # unicodeToAscii; lineToTensor('Jones')
    losses = v["all_losses"]
    assert len(losses) == 10 and np.mean(losses[-3:]) < losses[0] - 0.15, losses  # ln 5: 1.6
    confusion = v["confusion"].numpy()
    assert np.trace(confusion) / 5 > 0.35, confusion  # chance: 0.2


def test_char_rnn_generation(tmp_path, monkeypatch, capsys):
    """A category one-hot concatenated with the letter and the hidden state, ``nn.Dropout``
    (its masks replayed), ``loss = torch.Tensor([0]); loss += l`` over the letters,
    ``target_line_tensor.unsqueeze_(-1)``, ``torch.LongTensor(list)``, sampling by
    ``output.topk(1)`` and ``all_letters[topi]`` (a 0-d tensor as a string index)."""
    runs = run_both("char_rnn_generation_tutorial.py", tmp_path, monkeypatch, capsys,
                    files=names_by_language(), dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    ours, theirs = _without_times(ours), _without_times(theirs)
    assert ours == theirs, _diff(ours, theirs)
    np.testing.assert_allclose(v["all_losses"], w["all_losses"], rtol=1e-9)
    losses = v["all_losses"]
    assert len(losses) == 20 and np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.15, losses
    assert "O'Neal" in ours and ours.count("\n") > 12


# ------------------------------------------------------------------ spatial transformers


def test_spatial_transformer_tutorial(tmp_path, monkeypatch, capsys):
    """F.affine_grid / F.grid_sample behind a localisation net of Conv2d / MaxPool2d / ReLU,
    ``fc_loc[2].weight.data.zero_()`` and ``bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0],
    dtype=torch.float))`` (the identity to start from), Dropout2d and F.dropout, a shuffling
    DataLoader with ``num_workers=4``, ``nll_loss(size_average=False)``. The shuffles differ
    between the libraries, so the runs compare by what they learn; the trained tinytrain
    model, loaded into PyTorch's, gives the same test outputs."""
    runs = run_both("spatial_transformer_tutorial.py", tmp_path, monkeypatch, capsys)
    (ours, v, our_plots), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    results = {}
    for lib, out in (("tinytrain", ours), ("torch", theirs)):
        tests = [float(x) for x in re.findall(r"Test set: Average loss: ([\d.]+), Accuracy: "
                                              r"\d+/500", out)]
        assert len(tests) == 3 and tests[0] > tests[1] > tests[2], out  # slowly, it learns
        results[lib] = tests[-1]
    assert abs(results["tinytrain"] - results["torch"]) < 0.1, results
    assert [c[0] for c in our_plots] == ["ion", "subplots", "imshow", "set_title", "imshow",
                                         "set_title", "ioff", "show"]
    grid = our_plots[4][1][0]  # the transformed images, side by side
    assert grid.shape == (28, 64 * 30, 3) and 0 <= grid.min() and grid.max() <= 1
    ours_model, theirs_model = v["model"], w["model"]
    _copy_state(ours_model, theirs_model)
    x = np.random.default_rng(3).standard_normal((4, 1, 28, 28)).astype(np.float32)
    with tt.no_grad(), torch.no_grad(), pytest.warns(UserWarning, match="align_corners=False"):
        for fn in ("stn", "__call__"):  # (both warn that align_corners defaults to False)
            np.testing.assert_allclose(getattr(ours_model, fn)(tt.tensor(x)).numpy(),
                                       getattr(theirs_model, fn)(torch.tensor(x)).numpy(),
                                       rtol=1e-4, atol=1e-5, err_msg=fn)


def _copy_state(ours, theirs) -> None:
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.from_numpy(np.array(t.numpy())) for k, t in state.items()})
