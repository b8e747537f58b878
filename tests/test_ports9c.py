"""PyTorch's recurrent-network programs, ported by their imports, run with tinytrain and with
PyTorch on the same data and the same random numbers (``Draws`` of tests/test_ports9.py), and
what porting them found.

Programs (whole scripts in ``tests/tutorials/``, changed lines marked ``# tinytrain:``):
pytorch/examples' word_language_model (``data.py``, ``model.py``, ``main.py``,
``generate.py`` as ``wlm_*.py``: LSTM / GRU / RNN_TANH and the Transformer) and mnist_rnn,
the "Sequence models and LSTM" POS tagger and the seq2seq translation tutorial's encoder and
attention decoder (the newer char-RNN name classification tutorial, ``nn.RNN`` in a CharRNN
module, is in tests/test_ports9d.py).
"""

from __future__ import annotations

import re
import sys
import types
import warnings

import numpy as np
import pytest
import torch
from test_ports9 import _diff, _same_but_for_rounding, numbers, run_both
from test_tutorials import run, tutorial_module

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")


# ------------------------------------------------------------------ word_language_model


def tiny_corpus() -> dict[str, bytes]:
    """``data/wikitext-2/{train,valid,test}.txt`` made up: sentences of a small grammar
    (determiner, optional adjective, noun, verb, preposition, determiner, noun), one a line,
    so that a language model can learn which word class follows which."""
    rng = np.random.default_rng(3)
    det, adj = ["the", "a", "every"], ["red", "small", "old", "quick"]
    noun = ["cat", "dog", "bird", "fox", "mat", "tree"]
    verb, prep = ["sat", "ran", "slept", "looked"], ["on", "under", "near"]

    def sentence() -> str:
        words = [rng.choice(det)] + ([rng.choice(adj)] if rng.random() < 0.4 else [])
        words += [rng.choice(noun), rng.choice(verb), rng.choice(prep), rng.choice(det),
                  rng.choice(noun)]
        return " ".join(words) + " ."

    return {f"data/wikitext-2/{split}.txt": ("\n".join(sentence() for _ in range(n)) + "\n"
                                              ).encode()
            for split, n in (("train", 150), ("valid", 40), ("test", 40))}


WLM_FILES = {"data.py": tutorial_module("wlm_data.py"), "model.py": tutorial_module("wlm_model.py")}
WLM_ARGS = ["--emsize", "32", "--nhid", "32", "--epochs", "4", "--batch_size",
            "8", "--bptt", "10", "--dropout", "0", "--log-interval", "5"]


def _without_times(text: str) -> str:
    return re.sub(r"(ms/batch|time:)\s+[\d.]+s?", r"\1 (time)", text)


@pytest.mark.parametrize("rnn", [("LSTM", "1", True, "20"), ("GRU", "2", False, "5"),
                                 ("RNN_TANH", "1", False, "5")], ids=lambda r: r[0])
def test_word_language_model_rnn(rnn, tmp_path, monkeypatch, capsys):
    """main.py: ``Corpus`` by ``torch.tensor(ids).type(torch.int64)`` and ``torch.cat``,
    ``batchify`` (``narrow``, ``view(bsz, -1).t().contiguous()``), RNNModel with
    ``getattr(nn, rnn_type)``, tied weights, ``uniform_`` / ``zeros_`` inits and
    ``weight.new_zeros`` hidden states, ``repackage_hidden`` (``detach`` of a tensor or a
    tuple), ``clip_grad_norm_`` and ``p.data.add_(p.grad, alpha=-lr)``, evaluation under
    no_grad, ``torch.save(model, f)`` / ``torch.load(f, weights_only=False)`` and
    ``flatten_parameters``; then generate.py samples from the checkpoint (``multinomial``
    of ``output.squeeze().div(t).exp()``, ``input.fill_(word_idx)``). float64, dropout 0:
    the same losses as PyTorch's to 1e-9, and the model learns the grammar."""
    kind, layers, tied, lr = rnn
    argv = [*WLM_ARGS, "--model", kind, "--nlayers", layers, "--lr", lr] + (
        ["--tied"] if tied else [])
    files = {**tiny_corpus(), **WLM_FILES}
    runs = run_both("wlm_main.py", tmp_path, monkeypatch, capsys, files=files, argv=argv,
                    dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    ours, theirs = _without_times(ours), _without_times(theirs)
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-9)
    valid = [float(x) for x in re.findall(r"valid loss\s+([\d.]+)", ours)]
    (test,) = (float(x) for x in re.findall(r"test loss\s+([\d.]+)", ours))
    ntokens = len(v["corpus"].dictionary)
    assert len(valid) == 4 and valid[-1] < np.log(ntokens) - 0.9, (valid, ntokens)
    assert test < np.log(ntokens) - 0.9 and v["model"].rnn_type == kind
    model = v["model"]
    assert type(model).__module__ == "model" and next(model.parameters()).dtype == tt.float64
    if tied:
        assert model.decoder.weight is model.encoder.weight
    for (name, p), (_, q) in zip(model.named_parameters(), w["model"].named_parameters(),
                                 strict=True):  # the reloaded best model
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=name)
    # generate.py on each run's checkpoint
    gen_files = {**tiny_corpus(), "data.py": WLM_FILES["data.py"],
                 "model.py": WLM_FILES["model.py"],
                 "model.pt": lambda lib: (tmp_path / lib / "model.pt").read_bytes()}
    (tmp_path / "gen").mkdir()
    gens = run_both("wlm_generate.py", tmp_path / "gen", monkeypatch, capsys, files=gen_files,
                    argv=["--words", "60", "--log-interval", "20"], dtype="float64")
    (ours, v, _), (theirs, _, _) = gens["tinytrain"], gens["torch"]
    assert ours == theirs == "".join(f"| Generated {i}/60 words\n" for i in (0, 20, 40))
    text = [(tmp_path / "gen" / lib / "generated.txt").read_text() for lib in ("tinytrain",
                                                                              "torch")]
    assert text[0] == text[1] and text[0].count("\n") == 3
    words = text[0].split()
    assert len(words) == 60 and all(word in v["corpus"].dictionary.word2idx for word in words)
    # sampled from the trained model: a determiner is followed by an adjective or a noun
    after_det = [b for a, b in zip(words, words[1:]) if a in ("the", "a", "every")]
    grammatical = [b in ("red", "small", "old", "quick", "cat", "dog", "bird", "fox", "mat",
                         "tree") for b in after_det]
    assert len(after_det) > 5 and np.mean(grammatical) > 0.8, words


def test_word_language_model_transformer(tmp_path, monkeypatch, capsys):
    """main.py's TransformerModel: a subclass of ``nn.Transformer`` (its unused decoder too)
    with ``PositionalEncoding`` (``register_buffer('pe', ...)`` of ``torch.exp(torch.arange(0,
    d, 2).float() * (-math.log(10000.0) / d))``), the causal mask ``torch.log(torch.tril(
    torch.ones(sz, sz)))`` through ``self.encoder(src, mask=...)``; generate.py grows its input
    by ``torch.cat([input, torch.Tensor([[word_idx]]).long()], 0)``. nn.Transformer's layers
    keep PyTorch's dropout of 0.1, inside the attention where it cannot be replayed: the runs
    compare by learning, and tinytrain's trained weights give PyTorch's outputs."""
    argv = [*WLM_ARGS, "--model", "Transformer", "--nlayers", "1", "--lr", "5"]
    results = {}
    for lib in ("tinytrain", "torch"):
        with monkeypatch.context() as patches:
            out, v = run("wlm_main.py", lib, tmp_path, patches, capsys, argv,
                         files={**tiny_corpus(), **WLM_FILES})
        valid = [float(x) for x in re.findall(r"valid loss\s+([\d.]+)", out)]
        (test,) = (float(x) for x in re.findall(r"test loss\s+([\d.]+)", out))
        assert len(valid) == 4 and valid[-1] < valid[0] and test < 1.8, out  # ln 22 = 3.09
        results[lib] = test, v
    (ours, v), (theirs, w) = results["tinytrain"], results["torch"]
    assert abs(ours - theirs) < 0.15, (ours, theirs)
    model, other = v["model"], w["model"]
    assert model.model_type == "Transformer" and len(model.decoder.weight) == 22
    state = model.state_dict()
    assert list(state) == list(other.state_dict())
    assert state["pos_encoder.pe"].shape == (5000, 1, 32) and state["pos_encoder.pe"].dtype == (
        tt.float32)
    other.load_state_dict({k: torch.from_numpy(np.array(t.numpy())) for k, t in state.items()})
    data = v["test_data"][:10]
    with tt.no_grad(), torch.no_grad():
        mine = model(data).numpy()
        np.testing.assert_allclose(mine, other(torch.from_numpy(data.numpy())).numpy(),
                                   rtol=1e-4, atol=1e-5)
        assert mine.shape == (10, 10, 22)
        np.testing.assert_allclose(model.src_mask.numpy(), other.src_mask.numpy())
    # generate.py from tinytrain's checkpoint, and from PyTorch's model with its weights
    module = types.ModuleType("model")  # (the run's module, for pickle to find the classes in)
    module.__dict__.update(type(other).__init__.__globals__)
    monkeypatch.setitem(sys.modules, "model", module)
    torch.save(other, tmp_path / "torch" / "same.pt")
    del sys.modules["model"]
    (tmp_path / "gen").mkdir()
    gen_files = {**tiny_corpus(), "data.py": WLM_FILES["data.py"],
                 "model.py": WLM_FILES["model.py"],
                 "model.pt": lambda lib: (tmp_path / lib / ("model.pt" if lib == "tinytrain"
                                                            else "same.pt")).read_bytes()}
    gens = run_both("wlm_generate.py", tmp_path / "gen", monkeypatch, capsys, files=gen_files,
                    argv=["--words", "30", "--log-interval", "10"])
    assert gens["tinytrain"][0] == gens["torch"][0] == "".join(
        f"| Generated {i}/30 words\n" for i in (0, 10, 20))
    assert tuple(gens["tinytrain"][1]["input"].shape) == (31, 1)
    text = [(tmp_path / "gen" / lib / "generated.txt").read_text() for lib in ("tinytrain",
                                                                              "torch")]
    assert text[0] == text[1] and len(text[0].split()) == 30


# ------------------------------------------------------------------ mnist_rnn


def test_mnist_rnn(tmp_path, monkeypatch, capsys):
    """pytorch/examples' mnist_rnn: ``nn.LSTM(input_size=28, hidden_size=64,
    batch_first=True)`` over the image rows, ``output[:, -1, :]``, BatchNorm1d, ``Dropout2d``
    on 2-D input (PyTorch warns, and drops whole rows: its masks replayed), Adadelta, StepLR,
    ``F.nll_loss(reduction='sum')``, shuffling DataLoaders (their orders replayed). float32:
    PyTorch's losses, and it learns."""
    runs = run_both("mnist_rnn.py", tmp_path, monkeypatch, capsys,
                    argv=["--epochs", "2", "--lr", "1.0", "--batch-size", "64",
                          "--test-batch-size", "250", "--log-interval", "5", "--save-model"])
    (ours, _, _), (theirs, _, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=2e-4, atol=1e-5)
    tests = re.findall(r"Average loss: ([\d.]+), Accuracy: (\d+)/500", ours)
    (loss1, _), (loss2, correct) = tests
    assert float(loss2) < float(loss1) - 0.2 and int(correct) > 150, ours  # chance: 50
    assert "Train Epoch: 2 [960/1280 (75%)]" in ours
    state = tt.load(tmp_path / "tinytrain" / "mnist_rnn.pt")
    assert list(state) == list(torch.load(tmp_path / "torch" / "mnist_rnn.pt"))
    assert state["rnn.weight_ih_l0"].shape == (256, 28)


@pytest.mark.parametrize(("name", "shape"), [
    ("dropout2d", (6, 40)), ("dropout2d", (4, 30, 5)), ("dropout2d", (3, 20, 2, 2)),
    ("dropout2d", (2, 3, 8, 2, 2)), ("dropout1d", (4, 30, 5)), ("dropout1d", (30, 5)),
    ("dropout3d", (2, 20, 2, 2, 2)), ("dropout3d", (20, 2, 2, 2)), ("dropout3d", (5, 40))])
def test_feature_dropouts_drop_what_torch_drops(name, shape):
    """mnist_rnn's ``nn.Dropout2d`` on ``[N, 64]`` (it raised ShapeError): PyTorch's
    ``feature_dropout`` drops ``x[n, c]`` of ``[N, C, *]`` (each element of a 2-D input), a
    3-D input to dropout2d is ``[N, C, L]``, dropout1d / dropout3d take unbatched input; the
    same warnings (and the same pattern of zeros: whole features)."""
    results = {}
    for lib in (tt, torch):
        lib.manual_seed(0)
        x = lib.ones(shape, dtype=lib.float64)
        with pytest.warns() if name != "dropout1d" and len(shape) not in (
                {"dropout2d": (4,), "dropout3d": (5, 4)}[name]) else _no_warning() as caught:
            out = getattr(lib.nn.functional, name)(x, 0.5)
        results[lib.__name__] = out.numpy(), [str(w.message) for w in caught or []]
    (ours, our_warnings), (theirs, their_warnings) = results["tinytrain"], results["torch"]
    assert our_warnings == their_warnings
    assert ours.shape == theirs.shape == shape and set(np.unique(ours)) <= {0.0, 2.0}
    unbatched = (name, len(shape)) in (("dropout1d", 2), ("dropout3d", 4))
    units = (ours[None] if unbatched else ours).reshape(-1, int(np.prod(shape[-(len(shape) - (
        1 if unbatched else 2)):])) if len(shape) > 2 or unbatched else 1)
    assert (units.min(1) == units.max(1)).all()  # a feature is all 0 or all 2
    assert 0.25 < (units[:, 0] == 0).mean() < 0.75
    for lib in (tt, torch):
        x = lib.ones(shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert (getattr(lib.nn.functional, name)(x, 0.5, training=False) == 1).all()


class _no_warning:
    def __enter__(self):
        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return self.caught

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        assert not self.caught, [str(w.message) for w in self.caught]


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
def test_feature_dropout_errors(lib):
    F = lib.nn.functional
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"), \
            pytest.warns(UserWarning, match="Received a 1-D input to dropout2d"):
        F.dropout2d(lib.ones(5), 0.5)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received"):
        F.dropout1d(lib.ones(2, 3, 4, 5), 0.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout3d(lib.ones(2, 3, 4, 5, 6), 1.5)
    x = lib.ones(4, 30, 5)
    assert F.dropout1d(x, 1.0, inplace=True) is x and x.sum().item() == 0
    y = lib.ones(30, 5)
    assert F.dropout1d(y, 0.5, inplace=True) is y and y.min().item() == 0
    m = lib.nn.Dropout3d(0.5)
    assert m(lib.ones(2, 4, 2, 2, 2)).shape == (2, 4, 2, 2, 2)
    assert lib.nn.Dropout1d(0.5).eval()(x) is x


# ------------------------------------------------------------------ small gaps


@pytest.mark.parametrize("lib", [tt, torch], ids=["tinytrain", "torch"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_bce_with_an_integer_target_raises_as_torch(lib, dtype):
    """Class labels passed as they come (``y`` of a DataLoader, int64) to
    ``binary_cross_entropy_with_logits`` / ``BCEWithLogitsLoss`` / ``binary_cross_entropy``:
    PyTorch raises RuntimeError (the result can't be cast to the target's dtype); tinytrain
    converted them silently."""
    F = lib.nn.functional
    x, y = lib.zeros(4, requires_grad=True), lib.ones(4, dtype=getattr(lib, dtype))
    for loss in (lambda: F.binary_cross_entropy_with_logits(x, y),
                 lambda: lib.nn.BCEWithLogitsLoss()(x, y),
                 lambda: lib.nn.BCEWithLogitsLoss(pos_weight=lib.ones(4))(x, y),
                 lambda: F.binary_cross_entropy(x.sigmoid(), y), lambda: lib.nn.BCELoss()(
                     x.sigmoid(), y)):
        with pytest.raises(RuntimeError):
            loss()
    if dtype != "bool":  # (PyTorch's bool message is about subtracting bools)
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the "
                                               "desired output type (Long|Int)"):
            F.binary_cross_entropy_with_logits(x, y)
        with pytest.raises(RuntimeError, match="Found dtype (Long|Int) but expected Float"):
            F.binary_cross_entropy(x.sigmoid(), y)
    assert F.binary_cross_entropy_with_logits(x, y.float()).item() == pytest.approx(np.log(2))


class _SolveThatDoesNotRaise:
    """NumPy as CuPy behaves: ``linalg.solve`` of a singular matrix gives non-finite values
    (cuSOLVER's zero pivot divides), it does not raise."""

    linalg = types.SimpleNamespace(solve=lambda a, b: _solve_or_nan(a, b))
    isfinite, eye = staticmethod(np.isfinite), staticmethod(np.eye)

    def __getattr__(self, name):
        return getattr(np, name)


def _solve_or_nan(a, b):
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        with np.errstate(all="ignore"):
            return np.full(np.broadcast_shapes(a.shape[:-1], b.shape[:-2] + (1,)) + b.shape[-1:],
                           np.inf) * 0


@pytest.mark.parametrize("fake_gpu", [False, True], ids=["cpu", "solve-that-does-not-raise"])
def test_linalg_singular_raises_on_every_backend(fake_gpu, monkeypatch):
    """``tt.linalg.solve`` / ``inv`` of a singular matrix raise ``LinAlgError`` as PyTorch's
    (a RuntimeError) also where the array module's solve does not raise (CuPy's: it returns
    NaN / inf), while NaN or inf in A or B still give non-finite results without raising, as
    in PyTorch."""
    import tinytrain.linalg as linalg

    if fake_gpu:
        monkeypatch.setattr(linalg, "get_array_module", lambda a: _SolveThatDoesNotRaise())
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    for lib in (tt, torch):
        A = lib.tensor(singular)
        with pytest.raises(lib.linalg.LinAlgError, match="singular"):
            lib.linalg.solve(A, lib.ones(2, dtype=lib.float64))
        with pytest.raises(RuntimeError, match="singular"):
            lib.linalg.inv(A.expand(3, 2, 2))
        with pytest.raises(RuntimeError, match="singular"):
            lib.inverse(A)
    nan = np.array([[np.nan, 1.0], [1.0, 1.0]])
    np.testing.assert_array_equal(tt.linalg.solve(tt.tensor(nan), tt.ones(2, dtype=tt.float64)
                                                  ).numpy(),
                                  torch.linalg.solve(torch.tensor(nan), torch.ones(2,
                                                     dtype=torch.float64)).numpy())
    B = np.array([np.inf, 1.0])
    x = tt.linalg.solve(tt.tensor([[2.0, 1.0], [1.0, 1.0]]), tt.tensor(B, dtype=tt.float32))
    assert not np.isfinite(x.numpy()).any()
    ok = tt.linalg.solve(tt.tensor([[2.0, 1.0], [1.0, 1.0]]), tt.tensor([3.0, 2.0]))
    np.testing.assert_allclose(ok.numpy(), [1.0, 1.0])


def test_linalg_singular_raises_on_the_device(device):
    """The same on the GPU, where CuPy's solve does not raise."""
    A = tt.tensor([[1.0, 2.0], [2.0, 4.0]], device=device)
    with pytest.raises(tt.linalg.LinAlgError, match="singular"):
        tt.linalg.solve(A, tt.ones(2, device=device))
    with pytest.raises(tt.linalg.LinAlgError, match="singular"):
        tt.linalg.inv(A)
    x = tt.linalg.solve(tt.tensor([[2.0, 1.0], [1.0, 1.0]], device=device),
                        tt.tensor([3.0, 2.0], device=device))
    np.testing.assert_allclose(x.numpy(), [1.0, 1.0], rtol=1e-6)


# ------------------------------------------------------------------ NLP tutorials


def test_sequence_models_tutorial(tmp_path, monkeypatch, capsys):
    """"Sequence models and LSTM": ``nn.LSTM(3, 3)`` one step at a time with ``i.view(1, 1,
    -1)`` and a ``(h, c)`` tuple, then over the whole ``torch.cat(inputs).view(5, 1, -1)``
    (the last output is the final state), printed; the POS tagger (``nn.Embedding``,
    ``nn.LSTM``, ``hidden2tag``, ``F.log_softmax``, ``prepare_sequence`` by
    ``torch.tensor(idxs, dtype=torch.long)``), 300 epochs of SGD. float64: PyTorch's
    printout, and the tagger learns the tags."""
    runs = run_both("sequence_models_tutorial.py", tmp_path, monkeypatch, capsys,
                    dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-6, atol=1e-8)
    out, (h, c) = v["out"], v["hidden"]
    assert out.shape == (5, 1, 3) and h.shape == c.shape == (1, 1, 3)
    np.testing.assert_array_equal(out[-1].detach().numpy(), h[0].detach().numpy())
    scores = v["tag_scores"]
    np.testing.assert_allclose(scores.numpy(), w["tag_scores"].numpy(), rtol=1e-8)
    assert scores.argmax(1).tolist() == [0, 1, 2, 0, 1]  # DET NN V DET NN
    first = numbers(ours)[-30:-15]  # the scores before training: about ln(1/3) each
    assert np.mean(first) < -0.9 and scores.max(1).values.mean().item() > -0.1


def eng_fra() -> dict[str, bytes]:
    """A made-up ``data/eng-fra.txt`` (``English\\tFrench`` a line): "I am (very / too)
    tired." and the like for six subjects and eight adjectives, with accents that
    ``unicodeToAscii`` strips, the four sentences the tutorial translates at its end, and
    lines ``filterPairs`` drops."""
    subjects = [("I am", "Je suis"), ("He is", "Il est"), ("You are", "Vous êtes"),
                ("They are", "Ils sont")]
    adverbs = [("", ""), ("too ", "trop ")]
    adjectives = [("tired", "fatigué"), ("tall", "grand"), ("happy", "content"),
                  ("ready", "prêt"), ("sorry", "désolé"), ("proud", "fier")]
    lines = ["Go.\tVa !", "Hello!\tSalut !", "This is a pen.\tC'est un stylo."]
    lines += [f"{e} {ea}{eadj}.\t{f} {fa}{fadj}." for e, f in subjects for ea, fa in adverbs
              for eadj, fadj in adjectives]
    lines += ["He is not as tall as his father.\tIl n'est pas aussi grand que son père.",
              "I'm too tired to drive.\tJe suis trop fatigué pour conduire.",
              "I am sorry if this is a stupid question.\tJe suis désolé si c'est une "
              "question idiote.", "I'm really proud of you.\tJe suis réellement fière de vous."]
    return {"data/eng-fra.txt": ("\n".join(lines) + "\n").encode()}


def test_seq2seq_translation_tutorial(tmp_path, monkeypatch, capsys):
    """The seq2seq translation tutorial: ``Lang`` vocabularies, ``normalizeString``,
    ``filterPairs`` by English prefixes, a ``TensorDataset`` of ``torch.LongTensor(int32
    ndarray)`` with a ``RandomSampler`` (its orders replayed), EncoderRNN (``nn.GRU(...,
    batch_first=True)``, dropout replayed), AttnDecoderRNN with Bahdanau attention
    (``Va(tanh(Wa(q) + Ua(keys)))``, ``F.softmax``, ``torch.bmm``), teacher forcing by
    ``target_tensor[:, i].unsqueeze(1)``, greedy decoding by ``topk(1)`` and
    ``topi.squeeze(-1).detach()``, SOS / EOS tokens, Adam, the attention shown by
    ``matshow``. float64: PyTorch's losses, translations and attentions, and it learns."""
    runs = run_both("seq2seq_translation_tutorial.py", tmp_path, monkeypatch, capsys,
                    files=eng_fra(), dtype="float64")
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    ours, theirs = (re.sub(r"\d+m \d+s", "(time)", out) for out in (ours, theirs))
    assert ours == theirs or _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-8)
    assert "Read 55 sentence pairs\nTrimmed to 52 sentence pairs" in ours
    losses = [float(x) for x in re.findall(r"\(\d+ \d+%\) ([\d.]+)", ours)]
    assert len(losses) == 10 and losses[-1] < losses[0] / 2, losses
    matshows = [c for c in our_plots if c[0] == "matshow"]
    assert len(matshows) == 4
    for (_, (ours_attn,), _), (_, (theirs_attn,), _) in zip(matshows, [
            c for c in their_plots if c[0] == "matshow"]):
        assert ours_attn.dtype == np.float64
        np.testing.assert_allclose(ours_attn, theirs_attn, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(ours_attn.sum(1), 1.0)  # softmax over the source words
    translations = re.findall(r"^= (.*)\n< (.*)$", ours, re.M)
    # (after 60 steps of Adam at 1e-3: English sentences of the data's shape, not yet right)
    shaped = [output.endswith("<EOS>") and output.split()[0] in ("i", "he", "you", "they")
              for _, output in translations]
    assert len(translations) == 10 and np.mean(shaped) >= 0.5, translations
    for part in ("encoder", "decoder"):
        for (name, p), (_, q) in zip(v[part].named_parameters(), w[part].named_parameters(),
                                     strict=True):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-7,
                                       atol=1e-10, err_msg=name)


def test_onnx_imports_and_export_says_it_cannot():
    """word_language_model's ``import torch.onnx`` (it exports only with --onnx-export):
    importable; ``export`` raises NotImplementedError naming what to do instead."""
    import tinytrain.onnx

    assert tt.onnx is tinytrain.onnx and callable(torch.onnx.export)
    with pytest.raises(NotImplementedError, match="cannot export models to ONNX"):
        tt.onnx.export(tt.nn.Linear(2, 2), (tt.zeros(1, 2),), "model.onnx")
    with pytest.raises(AttributeError, match="tinytrain.onnx"):
        tt.onnx.dynamo_export  # noqa: B018
