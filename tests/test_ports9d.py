"""PyTorch's NLP tutorials, ported by their imports, run with tinytrain and with PyTorch on the
same data and the same random numbers (``Draws`` of tests/test_ports9.py), and what porting
them found.

Programs (whole scripts in ``tests/tutorials/``, changed lines marked ``# tinytrain:``): the
2024 version of "NLP From Scratch: Classifying Names with a Character-Level RNN"
(``NamesDataset``, ``random_split`` by fractions with a seeded ``Generator``, a ``CharRNN`` on
``nn.RNN``, minibatches by ``random.shuffle`` and ``np.array_split``), and "Deep Learning for
NLP with PyTorch"'s bag-of-words classifier and its n-gram language model (the page "Word
Embeddings: Encoding Lexical Semantics", with the CBOW exercise's data preparation).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from test_ports9 import (_diff, _same_but_for_rounding, _without_times, names_by_language,
                         numbers, run_both)

import tinytrain as tt

pytestmark = pytest.mark.usefixtures("torch_single_thread")


def test_char_rnn_classification_2024(tmp_path, monkeypatch, capsys):
    """float64: the same losses as PyTorch's to 1e-9, and it learns."""
    runs = run_both("char_rnn_classification_2024.py", tmp_path, monkeypatch, capsys,
                    files=names_by_language(), dtype="float64")
    (ours, v, our_plots), (theirs, w, their_plots) = runs["tinytrain"], runs["torch"]
    ours = re.sub(r"training took [\d.e-]+s", "", ours)
    theirs = re.sub(r"training took [\d.e-]+s", "", theirs)
    print(ours)
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-9)
    np.testing.assert_allclose(v["all_losses"], w["all_losses"], rtol=1e-9)


@pytest.mark.parametrize("name", ["nlp_deep_learning_tutorial.py",
                                  "nlp_word_embeddings_tutorial.py"])
def test_nlp(name, tmp_path, monkeypatch, capsys):
    runs = run_both(name, tmp_path, monkeypatch, capsys, dtype="float64")
    (ours, v, _), (theirs, w, _) = runs["tinytrain"], runs["torch"]
    # a float64 softmax's sum is 1 to the last bit or one bit off, printed "tensor(1.)" or
    # "tensor(1.0000)" (as PyTorch prints 1 + 2**-52); the two libraries' last bits differ
    ours, theirs = (re.sub(r"^tensor\(1\.(0000)?\)$", "tensor(1.0000)", o, flags=re.M)
                    for o in (ours, theirs))
    print(ours)
    assert _same_but_for_rounding(ours, theirs), _diff(ours, theirs)
    np.testing.assert_allclose(numbers(ours), numbers(theirs), rtol=1e-9)


@pytest.mark.parametrize(("lengths", "error"), [
    ([.85, .15], None), ([.5, .3, .2], None), ([.05, .05, .9], None), ([0.0, 1.0], None),
    ([3, 4], None), ([1.5, -.5], ValueError), ([.5, .6], ValueError), ([3, 3], ValueError),
    ([.5, 5], ValueError), ([2.5, 4.5], TypeError)])
def test_random_split_reads_lengths_and_fractions_as_torch(lengths, error):
    """Fractions summing to 1 (each in [0, 1], else ValueError; an empty split warns),
    integer lengths summing to ``len(dataset)`` (else ValueError), and non-integer lengths
    that do sum to it (TypeError): as PyTorch's ``random_split``."""
    results = {}
    for lib in (tt, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if error is not None:
                with pytest.raises(error):
                    lib.utils.data.random_split(range(7), lengths)
                continue
            parts = lib.utils.data.random_split(range(7), lengths,
                                                generator=lib.Generator().manual_seed(1))
        assert sorted(i for part in parts for i in part) == list(range(7))
        results[lib.__name__] = ([len(part) for part in parts],
                                 [str(w.message) for w in caught], [w.filename for w in caught])
    if error is None:
        (sizes, warned, files), (their_sizes, their_warned, _) = results.values()
        assert sizes == their_sizes and warned == their_warned, results
        assert all(f == __file__ for f in files)  # (stacklevel: the caller's line)
    if lengths == [.05, .05, .9]:
        assert results["tinytrain"][1] == [
            "Length of split at index 1 is 0. This might result in an empty dataset."]
