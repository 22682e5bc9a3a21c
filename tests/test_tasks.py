"""Each task's targets checked against its definition, on many samples from every split."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tasks import PAPER_TASK_NAMES, SPLITS, TASK_NAMES, Pair, get_task

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def decoded(name, split, n, seed):
    task = get_task(name)
    return [task.decode(pair) for pair in task.sample_batch(np.random.default_rng(seed), split, n)]


# -------------------------------------------------------------------------------------------- the registry

def test_registry_names_and_windows():
    assert PAPER_TASK_NAMES == ("copy", "reversal", "bigram_flip", "svo_sov", "gender")
    assert TASK_NAMES == (*PAPER_TASK_NAMES, "reverse_string", "duplicate_string")  # Delétang et al.'s, beside them
    assert SPLITS == {"train": (8, 64), "test": (65, 128), "long": (129, 256)}
    assert all(get_task(name).name == name for name in TASK_NAMES)
    assert all(get_task(name).splits == SPLITS for name in PAPER_TASK_NAMES)
    assert all(tuple(get_task(name).splits) == tuple(SPLITS) for name in TASK_NAMES)  # the same three names


def test_unknown_task_names_list_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown task 'cpy'; choose from: copy, reversal, bigram_flip, svo_sov"):
        get_task("cpy")


@pytest.mark.parametrize("name", TASK_NAMES)
def test_impossible_arguments_are_clear_errors(name):
    task, rng = get_task(name), np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"unknown split 'valid'; choose from: train, test, long"):
        task.sample(rng, split="valid")
    for n in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match=r"the number of pairs must be an integer >= 1, got"):
            task.sample_batch(rng, "train", n)


@pytest.mark.parametrize("name, sizes", [("copy", (128, 128)), ("reversal", (128, 128)), ("bigram_flip", (128, 128)),
                                         ("svo_sov", (100, 100)), ("gender", (104, 107))])
def test_vocabulary_sizes(name, sizes):
    task = get_task(name)
    assert (len(task.source_vocab), len(task.target_vocab)) == sizes
    assert all(isinstance(w, str) for w in task.source_vocab + task.target_vocab)


@pytest.mark.parametrize("name", TASK_NAMES)
@pytest.mark.parametrize("split", SPLITS)
def test_lengths_stay_in_the_window_and_ids_in_the_vocabulary(name, split):
    task = get_task(name)
    low, high = task.window(split)
    pairs = task.sample_batch(np.random.default_rng(1), split, 150)
    assert all(isinstance(p, Pair) for p in pairs)
    assert all(low <= len(p.source) <= high for p in pairs)
    assert all(0 <= i < len(task.source_vocab) for p in pairs for i in p.source)
    assert all(0 <= i < len(task.target_vocab) for p in pairs for i in p.target)
    if name in ("svo_sov", "gender"):
        assert all(len(p.source) == len(p.target) for p in pairs)


@pytest.mark.parametrize("name", ["copy", "reversal", "bigram_flip"])
def test_synthetic_lengths_are_uniform_over_the_window(name):
    lengths = np.array([len(p.source) for p in get_task(name).sample_batch(np.random.default_rng(2), "train", 5000)])
    expected = np.arange(8, 65, 2 if name == "bigram_flip" else 1)
    assert set(lengths) == set(expected)  # every allowed length occurs, nothing else
    counts = np.bincount(lengths)[expected]
    assert counts.min() > 0.6 * counts.mean() and counts.max() < 1.4 * counts.mean()


@pytest.mark.parametrize("name", TASK_NAMES)
def test_same_seed_same_data_other_seed_other_data(name):
    task = get_task(name)
    first = task.sample_batch(np.random.default_rng(11), "train", 20)
    assert task.sample_batch(np.random.default_rng(11), "train", 20) == first
    assert task.sample_batch(np.random.default_rng(12), "train", 20) != first
    assert task.sample(np.random.default_rng(11), "test") != task.sample(np.random.default_rng(12), "test")


def test_decode_gives_words():
    task = get_task("copy")
    assert task.decode(Pair((0, 127), (0, 127))) == {"source": ["a1", "a128"], "target": ["a1", "a128"]}


# ----------------------------------------------------------------------------------- the synthetic tasks

@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, split=st.sampled_from(list(SPLITS)))
def test_copy_target_is_the_source(seed, split):
    for pair in decoded("copy", split, 5, seed):
        assert pair["target"] == pair["source"]


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, split=st.sampled_from(list(SPLITS)))
def test_reversal_target_is_the_source_backwards(seed, split):
    for pair in decoded("reversal", split, 5, seed):
        source, target = pair["source"], pair["target"]
        assert all(target[k] == source[len(source) - 1 - k] for k in range(len(source)))
        assert len(target) == len(source)


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, split=st.sampled_from(list(SPLITS)))
def test_bigram_flip_swaps_each_odd_position_with_the_next(seed, split):
    for pair in decoded("bigram_flip", split, 5, seed):
        source, target = pair["source"], pair["target"]
        assert len(source) % 2 == 0 and len(target) == len(source)
        for i in range(0, len(source), 2):  # 1-based odd i is 0-based even i
            assert (target[i], target[i + 1]) == (source[i + 1], source[i])


# ---------------------------------------------------------------------------------------- the ITG tasks

def main_verb(source: list[str]) -> int:
    """Position of the main verb: the first verb that does not close a relative clause (every 'rpi' opens a
    clause that the next unmatched verb closes)."""
    open_clauses = 0
    for k, word in enumerate(source):
        if word == "rpi":
            open_clauses += 1
        elif word.startswith("vi"):
            if open_clauses == 0:
                return k
            open_clauses -= 1
    raise AssertionError(f"no main verb in {source}")


def svo_translation(source: list[str]) -> list[str]:
    """Table 1a written out independently of the grammar engine: translate each word (si->so, oi->oo, vi->vo,
    rpi->rpo) and move the main verb to the end."""
    assert all(re.fullmatch(r"[sov]i\d+|rpi", w) for w in source), source
    words = [w[0] + "o" + w[2:] if w != "rpi" else "rpo" for w in source]
    main = main_verb(source)
    return words[:main] + words[main + 1:] + [words[main]]


def test_svo_translation_reproduces_the_papers_sample():
    source = "si1 vi28 oi5 oi7 si15 rpi si19 vi16 oi10 oi24".split()
    assert svo_translation(source) == "so1 oo5 oo7 so15 rpo so19 vo16 oo10 oo24 vo28".split()


@pytest.mark.parametrize("split", SPLITS)
def test_svo_sov_moves_the_main_verb_behind_the_object(split):
    pairs = decoded("svo_sov", split, 300, seed=5)
    for pair in pairs:
        assert pair["target"] == svo_translation(pair["source"])
    # the samples exercise relative clauses in subjects and in objects, not just S V O
    assert sum("rpi" in p["source"][:main_verb(p["source"])] for p in pairs) > 10
    assert sum("rpi" in p["source"][main_verb(p["source"]):] for p in pairs) > 10


GERMAN_ARTICLE = {("the", "m"): "der", ("the", "f"): "die", ("the", "n"): "das",
                  ("a", "m"): "ein", ("a", "f"): "eine", ("a", "n"): "ein"}
AGREES = {"der": {"m"}, "die": {"f"}, "das": {"n"}, "ein": {"m", "n"}, "eine": {"f"}}


def gender_translation(source: list[str]) -> list[str]:
    """Table 1b written out: words map one to one; an article becomes the German article of the following noun's
    class (em = masculine, ef = feminine, en = neuter)."""
    target = []
    for k, word in enumerate(source):
        if word in ("the", "a"):
            noun = re.fullmatch(r"e([mfn])\d+", source[k + 1])
            assert noun, f"article {word!r} not followed by a noun in {source}"
            target.append(GERMAN_ARTICLE[word, noun.group(1)])
        elif word in ("and", "or"):
            target.append({"and": "und", "or": "oder"}[word])
        else:
            match = re.fullmatch(r"(we|e[mfn])(\d+)", word)
            assert match, word
            target.append({"we": "wg"}.get(match.group(1), "g" + match.group(1)[1:]) + match.group(2))
    return target


@pytest.mark.parametrize("split", SPLITS)
def test_gender_articles_agree_with_their_nouns_class(split):
    pairs = decoded("gender", split, 300, seed=6)
    for pair in pairs:
        source, target = pair["source"], pair["target"]
        assert target == gender_translation(source)
        for k, word in enumerate(target):
            if word in AGREES:
                assert re.fullmatch(r"g[mfn]\d+", target[k + 1]) and target[k + 1][1] in AGREES[word], target
    articles = {w for p in pairs for w in p["target"] if w in AGREES}
    assert articles == set(AGREES)  # every article occurs


def test_gender_translation_reproduces_the_papers_sample():
    assert gender_translation("we11 the en19 and the em17".split()) == "wg11 das gn19 und der gm17".split()
