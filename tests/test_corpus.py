"""The Devil's Dictionary shipped as package data and ``cr.data.CharCorpus``: the cleaned text, the
split by entry (sizes, determinism, every character in one split), the vocabulary, encode/decode,
random batches and validation windows, the unigram baseline, bad input, and no network."""
import builtins
import collections
import math
import re
import socket

import numpy as np
import pytest

import chainrule as cr
from chainrule import data

N_CHARS, N_ENTRIES, N_VOCAB = 380_575, 999, 81
UNIGRAM_BITS = 4.470381629277358          # CharCorpus.devils_dictionary(0.1, seed=0), computed once


@pytest.fixture(scope="module")
def text():
    return data.load_devils_dictionary()


@pytest.fixture(scope="module")
def corpus():
    return data.CharCorpus.devils_dictionary(val_fraction=0.1, seed=0)


def entries_of(text):
    """The entries, found independently of the loader: cut before each capital opening a paragraph."""
    return re.split(r"(?<=\n\n)(?=[A-Z])", text)


def test_shipped_text_is_the_cleaned_dictionary(text):
    assert len(text) == N_CHARS and text.isascii()
    assert text.startswith("ABASEMENT, n.  A decent and customary mental attitude")
    assert text.endswith("the domestic cow sheds its horn every two years.\n\n")
    assert not re.search(r" \n", text) and "\n\n\n" not in text     # no trailing spaces, single blank lines
    assert "-)(-" not in text and not re.search(r"^ +[A-Z]$", text, re.M)   # end marks, section letters gone
    with open(data.DEVILS_DICTIONARY_PATH, "rb") as f:
        header = f.read(10)
    assert header[:2] == b"\x1f\x8b" and header[4:8] == b"\0\0\0\0"   # gzip, mtime 0: reproducible
    readme = open(data.DEVILS_DICTIONARY_PATH.replace("devils_dictionary.txt.gz", "README.txt")).read()
    assert "Devil's Dictionary" in readme and "public domain" in readme and "mtime=0" in readme


def test_load_is_cached(text):
    assert data.load_devils_dictionary() is text


def test_entries_are_headword_paragraphs(text):
    entries = entries_of(text)
    assert len(entries) == N_ENTRIES and "".join(entries) == text
    assert all(e.endswith("\n\n") and not e.endswith("\n\n\n") for e in entries)
    heads = [re.match(r"[A-Z][A-Z'-]*", e).group() for e in entries]       # a headword: a capitalized word
    assert not [e[:20] for e, h in zip(entries, heads) if e[len(h)].islower()]
    assert heads[:3] == ["ABASEMENT", "ABATIS", "ABDICATION"] and heads[-1] == "ZOOLOGY"
    assert "MEERSCHAUM" in heads and "MEEKNESS" in heads    # the source ran these two together
    assert [h[0] for h in heads] == sorted(h[0] for h in heads)


def test_split_by_entry(text, corpus):
    assert corpus.entries == (899, 100)
    assert len(corpus.train) == 346_311 and len(corpus.val) == 34_264
    assert len(corpus.train) + len(corpus.val) == len(text)
    assert corpus.train.dtype == np.int64 and corpus.val.dtype == np.int64
    assert corpus.train.ndim == 1 and corpus.val.ndim == 1
    entries = entries_of(text)
    chosen = set(np.random.default_rng(0).permutation(N_ENTRIES)[:100].tolist())
    assert corpus.decode(corpus.val) == "".join(e for i, e in enumerate(entries) if i in chosen)
    assert corpus.decode(corpus.train) == "".join(e for i, e in enumerate(entries) if i not in chosen)


def test_split_is_deterministic_and_follows_the_seed(corpus):
    again = data.CharCorpus(data.load_devils_dictionary(), val_fraction=0.1, seed=0)
    np.testing.assert_array_equal(again.train, corpus.train)
    np.testing.assert_array_equal(again.val, corpus.val)
    other = data.CharCorpus.devils_dictionary(val_fraction=0.1, seed=1)
    assert other.entries == (899, 100) and other.decode(other.val) != corpus.decode(corpus.val)
    assert data.CharCorpus.devils_dictionary(val_fraction=0.25).entries == (749, 250)   # round(249.75)
    none = data.CharCorpus.devils_dictionary(val_fraction=0.0)
    assert none.entries == (N_ENTRIES, 0) and len(none.train) == N_CHARS and len(none.val) == 0


def test_vocabulary_and_round_trip(text, corpus):
    assert len(corpus.vocab) == N_VOCAB and corpus.vocab == tuple(sorted(set(text)))
    assert corpus.vocab[:3] == ("\n", " ", "!") and corpus.vocab[-1] == "z"
    ids = corpus.encode(text)
    assert ids.dtype == np.int64 and ids.shape == (N_CHARS,) and ids.min() == 0 and ids.max() == N_VOCAB - 1
    assert corpus.decode(ids) == text
    assert corpus.encode("ABC").tolist() == [corpus.vocab.index(c) for c in "ABC"]
    assert corpus.decode(corpus.encode("ABC").tolist()) == "ABC"
    assert corpus.decode(cr.tensor(corpus.encode("Devil"))) == "Devil"
    assert corpus.decode(np.int64(corpus.vocab.index("q"))) == "q"
    assert corpus.encode("").shape == (0,) and corpus.decode([]) == ""


def test_any_text_unicode_and_the_lone_entry():
    c = data.CharCorpus("\u00dcber \u2713 caf\u00e9\n\nB\u00e9\n\n", val_fraction=0.5, seed=0)
    assert c.entries == (1, 1) and c.decode(c.encode("caf\u00e9 \u2713")) == "caf\u00e9 \u2713"
    assert c.vocab == tuple(sorted(set("\u00dcber \u2713 caf\u00e9\n\nB\u00e9")))
    nul = data.CharCorpus("a\x00b")                                  # NumPy's str arrays would drop a NUL
    assert nul.vocab == ("\x00", "a", "b") and nul.decode(nul.encode("\x00ab\x00")) == "\x00ab\x00"
    one = data.CharCorpus("no headword here\n\nnor here", val_fraction=0.4)
    assert one.entries == (1, 0) and one.decode(one.train) == "no headword here\n\nnor here"


def test_batch_windows_are_drawn_from_the_generator(corpus):
    x, y = corpus.batch("train", 8, 32, generator=np.random.default_rng(3))
    assert x.shape == (8, 32) and y.shape == (8, 32) and x.dtype == np.int64 and y.dtype == np.int64
    starts = np.random.default_rng(3).integers(0, len(corpus.train) - 32, size=8)
    np.testing.assert_array_equal(x.data, corpus.train[starts[:, None] + np.arange(32)])
    np.testing.assert_array_equal(y.data, corpus.train[starts[:, None] + np.arange(1, 33)])
    np.testing.assert_array_equal(x.data[:, 1:], y.data[:, :-1])
    xv, yv = corpus.batch("val", 2, 5, generator=np.random.default_rng(3))
    assert xv.shape == (2, 5) and corpus.decode(xv[0]) in corpus.decode(corpus.val)


def test_batch_follows_manual_seed(corpus):
    cr.random.manual_seed(11)
    a = corpus.batch("train", 4, 16)
    cr.random.manual_seed(11)
    b = corpus.batch("train", 4, 16)
    c = corpus.batch("train", 4, 16)
    np.testing.assert_array_equal(a[0].data, b[0].data)
    np.testing.assert_array_equal(a[1].data, b[1].data)
    assert not np.array_equal(b[0].data, c[0].data)


def test_batch_starts_cover_their_whole_range():
    c = data.CharCorpus("ab\n\ncd\n\n", val_fraction=0.0)           # train: 8 characters
    gen = np.random.default_rng(0)
    x, y = c.batch("train", 200, 6, generator=gen)                  # starts in {0, 1}
    assert sorted({c.decode(row) for row in x.data}) == ["ab\n\ncd", "b\n\ncd\n"]
    assert {c.decode(row) for row in y.data} == {"b\n\ncd\n", "\n\ncd\n\n"}
    x, y = c.batch("train", 3, 7, generator=gen)                    # the one window that fits
    assert {c.decode(row) for row in x.data} == {"ab\n\ncd\n"} and c.decode(y[0]) == "b\n\ncd\n\n"


def test_windows_cover_the_split_once(corpus):
    n_ctx, b = 128, 100
    batches = list(corpus.windows("val", b, n_ctx))
    n_windows = (len(corpus.val) - 1) // n_ctx
    assert n_windows == 267 and [x.shape for x, _ in batches] == [(100, 128), (100, 128), (67, 128)]
    xs = np.concatenate([x.data for x, _ in batches])
    ys = np.concatenate([y.data for _, y in batches])
    np.testing.assert_array_equal(xs.reshape(-1), corpus.val[:n_windows * n_ctx])
    np.testing.assert_array_equal(ys.reshape(-1), corpus.val[1:n_windows * n_ctx + 1])
    assert all(x.dtype == np.int64 and y.dtype == np.int64 for x, y in batches)
    again = list(corpus.windows("val", b, n_ctx))
    assert all(np.array_equal(x1.data, x2.data) for (x1, _), (x2, _) in zip(batches, again))


def test_windows_exact_fit():
    c = data.CharCorpus("abcdefg\n\n", val_fraction=0.0)            # 9 characters: 2 windows of 4
    got = [(c.decode(x[i]), c.decode(y[i])) for x, y in c.windows("train", 1, 4) for i in range(len(x))]
    assert got == [("abcd", "bcde"), ("efg\n", "fg\n\n")]
    assert [x.shape for x, _ in c.windows("train", 5, 8)] == [(1, 8)]


def test_unigram_bits(text, corpus):
    bits = corpus.unigram_bits()
    assert 4.0 < bits < 4.7 and abs(bits - UNIGRAM_BITS) < 1e-9
    counts = collections.Counter(corpus.decode(corpus.train))
    total = sum(counts.values()) + len(corpus.vocab)
    val = corpus.decode(corpus.val)
    expected = -sum(math.log2((counts[ch] + 1) / total) for ch in val) / len(val)
    assert abs(bits - expected) < 1e-10


def test_bad_input_names_the_method_value_and_fix(corpus):
    with pytest.raises(data.DataError, match=r"CharCorpus.batch: split must be 'train' or 'val', got 'test'"):
        corpus.batch("test", 2, 8)
    with pytest.raises(data.DataError, match=r"CharCorpus.windows: split must be 'train' or 'val', got 'valid'"):
        corpus.windows("valid", 2, 8)
    with pytest.raises(data.DataError, match=r"CharCorpus.batch: batch_size must be an int >= 1, got 0"):
        corpus.batch("train", 0, 8)
    with pytest.raises(data.DataError, match=r"CharCorpus.windows: n_ctx must be an int >= 1, got 0"):
        corpus.windows("val", 2, 0)
    with pytest.raises(data.DataError, match=r"CharCorpus.batch: n_ctx=34264 .* the 'val' split has 34264: "
                                             r"use a smaller n_ctx"):
        corpus.batch("val", 2, 34_264)
    with pytest.raises(data.DataError, match="CharCorpus.encode: characters '~\u00e9' .* position 2.* "
                                             r"not in the corpus' vocabulary of 81"):
        corpus.encode("ab~\u00e9")
    with pytest.raises(data.DataError, match=r"CharCorpus.decode: ids must be in \[0, 81\)"):
        corpus.decode([0, 81])
    with pytest.raises(data.DataError, match=r"CharCorpus.decode: .* shape \(2, 2\).*corpus.decode\(x\[0\]\)"):
        corpus.decode(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(data.DataError, match=r"CharCorpus: val_fraction must be in \[0, 1\), got 1.5"):
        data.CharCorpus("abc", val_fraction=1.5)
    with pytest.raises(data.DataError, match=r"CharCorpus: val_fraction=0.9 of the text's 2 entries leaves none"):
        data.CharCorpus("A\n\nB\n\n", val_fraction=0.9)
    with pytest.raises(data.DataError, match=r"CharCorpus: text must be a non-empty str"):
        data.CharCorpus("")
    with pytest.raises(data.DataError, match=r"CharCorpus.unigram_bits: the validation split is empty"):
        data.CharCorpus.devils_dictionary(val_fraction=0.0).unigram_bits()
    assert issubclass(data.DataError, ValueError)


def test_loading_reads_only_the_shipped_file_and_never_the_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("load_devils_dictionary must not touch the network")

    opened = []
    real_open = builtins.open

    def recording_open(file, *args, **kwargs):
        opened.append(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(builtins, "open", recording_open)
    data.load_devils_dictionary.cache_clear()
    try:
        text = data.load_devils_dictionary()
        corpus = data.CharCorpus.devils_dictionary()
    finally:
        monkeypatch.undo()
    assert opened == [data.DEVILS_DICTIONARY_PATH]
    assert len(text) == N_CHARS and corpus.entries == (899, 100)
