"""Sampling a grammar at a given length (§4.2's "relatively uniform distribution" of lengths): exact, flat, seeded.

The oracles: a brute-force enumeration of a small grammar's derivations (exact probabilities of each length and of
each sentence pair at a length), and the rejection sampler, which draws the grammar's own distribution.
"""

from collections import Counter
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from pipeline.config import (
    LATER_MODEL_KEYS,
    LATER_TRAINING_KEYS,
    MEASUREMENT_KEYS,
    RunConfig,
    config_hash,
    model_settings,
    stored_run_config,
    to_dict,
)
from pipeline.tasks import SPLITS, get_task
from pipeline.tasks.grammar import Grammar, _uniforms

# A small grammar with the shapes the paper's grammars have: binary recursion, literals around a linked symbol,
# reordering, a unary rule (B -> T1), three links in one rule, and a length it cannot derive (1).
TOY = Grammar.from_dict({
    "start": "A",
    "rules": {
        "A": [{"p": "1/2", "rule": "B1 B2 | B2 B1"}, {"p": "1/2", "rule": "B1 c X2 | X2 B1 c"}],
        "B": [{"p": "1/4", "rule": "B1 B2 | B2 B1"}, {"p": "1/4", "rule": "a B1 b | b B1 a"},
              {"p": "1/2", "rule": "T1 | T1"}],
        "X": [{"p": "1/3", "rule": "x X1 y | y X1 x"}, {"p": "2/3", "rule": "x y z | z y x"}],
    },
    "terminal_classes": {"T": {"size": 2, "source": "s{i}", "target": "t{i}"}},
}, name="toy")


def enumerate_pairs(grammar: Grammar, symbol: str, n: int) -> dict[tuple[tuple[str, ...], tuple[str, ...]], Fraction]:
    """Every (source, target) pair ``symbol`` derives with exactly n source words, with its exact probability."""

    @cache
    def derive(symbol: str, n: int) -> dict:
        if symbol in grammar.classes:
            c = grammar.classes[symbol]
            return {((s,), (t,)): Fraction(1, len(c.source)) for s, t in zip(c.source, c.target)} if n == 1 else {}
        out: dict = Counter()
        for rule in grammar.rules[symbol]:
            links = rule.links
            fixed = sum(1 for item in rule.source if isinstance(item, str))

            def splits(k: int, m: int, links=links):  # bound now: called within this iteration
                if k == len(links):
                    if m == 0:
                        yield {}
                    return
                for size in range(1, m - (len(links) - k - 1) + 1):  # leave a word for each later link
                    for parts in derive(links[k].symbol, size).items():
                        for rest in splits(k + 1, m - size, links):
                            yield {links[k].index: parts, **rest}

            for chosen in splits(0, n - fixed):
                p = Fraction(rule.p).limit_denominator(1000)
                sides = []
                for side, items in ((0, rule.source), (1, rule.target)):
                    words: list[str] = []
                    for item in items:
                        words += [item] if isinstance(item, str) else list(chosen[item.index][0][side])
                    sides.append(tuple(words))
                for pair_p in (parts[1] for parts in chosen.values()):
                    p *= pair_p
                out[tuple(sides)] += p
        return dict(out)

    return derive(symbol, n)


def test_inside_probabilities_are_the_exact_length_distribution():
    sampler = TOY.length_sampler(9)
    p = sampler.length_probabilities()
    for n in range(10):
        exact = sum(enumerate_pairs(TOY, "A", n).values()) if n else 0
        assert p[n] == pytest.approx(float(exact), abs=1e-12), n
    assert list(sampler.possible_lengths(1, 9)) == [n for n in range(1, 10) if p[n] > 0]


@pytest.mark.parametrize("n", [5, 6])
def test_a_draw_at_length_n_follows_the_grammar_given_n(n):
    """Pair frequencies of 20,000 draws at length n against the exact conditional probabilities (chi-square)."""
    exact = enumerate_pairs(TOY, "A", n)
    total = sum(exact.values())
    sampler = TOY.length_sampler(n)
    uniforms = _uniforms(np.random.default_rng(n))
    draws = 20_000
    counts = Counter()
    for _ in range(draws):
        root = sampler.derive(uniforms, n)
        source = tuple(TOY.source_vocab[i] for i in TOY._linearize(root, 0))
        target = tuple(TOY.target_vocab[i] for i in TOY._linearize(root, 1))
        counts[source, target] += 1
    assert set(counts) <= set(exact)  # nothing the grammar cannot derive
    expected = {pair: draws * float(p / total) for pair, p in exact.items()}
    rare = [pair for pair, e in expected.items() if e < 5]  # pooled into one cell, for the chi-square
    observed = {pair: counts[pair] for pair in expected if pair not in rare}
    expected = {pair: e for pair, e in expected.items() if pair not in rare}
    if rare:
        observed["rare"] = sum(counts[pair] for pair in rare)
        expected["rare"] = draws * float(sum(exact[pair] for pair in rare) / total)
    chi2 = sum((observed[pair] - e) ** 2 / e for pair, e in expected.items())
    # 99.9% quantile of chi-square with (cells - 1) degrees of freedom, by the Wilson-Hilferty approximation
    k = len(expected) - 1
    limit = k * (1 - 2 / (9 * k) + 3.09 * (2 / (9 * k)) ** 0.5) ** 3
    assert chi2 < limit, (chi2, limit, k)


def test_a_length_the_grammar_cannot_derive_is_refused():
    sampler = TOY.length_sampler(8)
    impossible = [n for n in range(1, 9) if sampler.length_probabilities()[n] == 0]
    assert impossible == [1]
    with pytest.raises(ValueError, match="derives no sentence of length"):
        sampler.derive(_uniforms(np.random.default_rng(0)), impossible[0])


@pytest.mark.parametrize("name", ["svo_sov", "gender"])
def test_uniform_lengths_are_flat_over_the_window(name):
    task = get_task(name, "uniform")
    low, high = SPLITS["train"]
    pairs = task.sample_batch(np.random.default_rng(7), "train", 5_700)
    lengths = np.bincount([len(p.source) for p in pairs], minlength=high + 1)[low:]
    assert all(len(p.source) == len(p.target) for p in pairs)
    expected = len(pairs) / (high - low + 1)
    chi2 = float(((lengths - expected) ** 2 / expected).sum())
    assert chi2 < 98.0, chi2  # 99.9% quantile of chi-square with 56 degrees of freedom is 98.3
    # The grammar's own lengths are far from flat: lengths 9-16 hold many times the mass of 57-64.
    skewed = get_task(name, "grammar").sample_batch(np.random.default_rng(7), "train", 2_000)
    short = sum(9 <= len(p.source) <= 16 for p in skewed)
    long = sum(57 <= len(p.source) <= 64 for p in skewed)
    assert short > 5 * long


@pytest.mark.parametrize("name, n", [("svo_sov", 9), ("gender", 11)])
def test_within_a_length_pairs_follow_the_grammar_as_rejection_gives_them(name, n):
    """Against the rejection sampler at one length: the share of each target pattern (which words are literals of
    the rules, e.g. the relative pronouns, 'and', 'or', articles) agrees within sampling error."""
    grammar = get_task(name).grammar
    draws = 4_000
    conditioned = grammar.sample_uniform_lengths(np.random.default_rng(1), draws, n, n)
    rejected = grammar.sample(np.random.default_rng(2), draws, n, n)

    def shape(pair):  # the target with every terminal-class word replaced by its class: the derivation's shape
        words = [grammar.target_vocab[i] for i in pair[1]]
        return tuple(w if w in _literals(grammar) else w.rstrip("0123456789") for w in words)

    a, b = Counter(map(shape, conditioned)), Counter(map(shape, rejected))
    assert len(a) > 3
    for key in set(a) | set(b):
        pa, pb = a[key] / draws, b[key] / draws
        se = (max(pa + pb, 2 / draws) * (1 - (pa + pb) / 2) / draws) ** 0.5
        assert abs(pa - pb) < 4.5 * se, (key, pa, pb)


def _literals(grammar):
    return {w for rules in grammar.rules.values() for rule in rules for w in rule.target if isinstance(w, str)}


@pytest.mark.parametrize("name", ["svo_sov", "gender"])
def test_uniform_pairs_are_derivable_and_seeded(name):
    task = get_task(name, "uniform")
    pairs = task.sample_batch(np.random.default_rng(3), "train", 12)
    assert pairs == task.sample_batch(np.random.default_rng(3), "train", 12)
    assert pairs != task.sample_batch(np.random.default_rng(4), "train", 12)
    grammar = task.grammar
    for pair in pairs[:4]:
        words = task.decode(pair)
        if len(words["source"]) <= 24:  # the chart parser is cubic in the length
            assert tuple(words["target"]) in grammar.translations(words["source"])


def test_readings_are_separate_tasks_with_separate_fingerprints():
    uniform, grammar = get_task("svo_sov", "uniform"), get_task("svo_sov", "grammar")
    assert uniform.fingerprint() != grammar.fingerprint()
    assert get_task("svo_sov") is uniform  # uniform is the default
    assert get_task("copy", "grammar") is get_task("copy")  # the synthetic tasks have one distribution
    assert get_task("copy").fingerprint() == get_task("copy", "grammar").fingerprint()
    with pytest.raises(ValueError, match="unknown length distribution 'flat'; choose from: uniform, grammar"):
        get_task("svo_sov", "flat")


def test_run_ids_made_before_the_setting_existed_are_kept():
    """A run id hashes the config's identity; runs trained on the grammar's lengths before the setting existed,
    and every synthetic-task run, keep theirs, and a stored config without the key reads as the grammar's."""
    def old_id(config: RunConfig) -> str:
        # the keys a config had then: none of LATER_TRAINING_KEYS or LATER_MODEL_KEYS (added since, left out at
        # their old value)
        training = {k: v for k, v in to_dict(config.training).items()
                    if k != "max_batches" and k not in LATER_TRAINING_KEYS and k not in MEASUREMENT_KEYS}
        model = {k: v for k, v in model_settings(config.model.resolved()).items() if k not in LATER_MODEL_KEYS}
        old = {"task": config.task, "model": model, "training": training}
        return config_hash(old)

    itg_grammar = RunConfig(task="svo_sov", length_distribution="grammar")
    itg_uniform = RunConfig(task="svo_sov", length_distribution="uniform")
    copy_uniform = RunConfig(task="copy")
    assert itg_grammar.run_id().endswith(old_id(itg_grammar))
    assert copy_uniform.run_id().endswith(old_id(copy_uniform))
    assert RunConfig(task="copy", length_distribution="grammar").run_id() == copy_uniform.run_id()
    assert itg_uniform.run_id() != itg_grammar.run_id()
    stored = {k: v for k, v in to_dict(itg_uniform).items() if k != "length_distribution"}
    assert stored_run_config(stored) == itg_grammar
