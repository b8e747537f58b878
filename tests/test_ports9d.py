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
