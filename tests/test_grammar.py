"""The synchronous-grammar engine: validation, the paper's samples, sampler/parser agreement, termination."""

import re

import numpy as np
import pytest

from pipeline.tasks import get_task
from pipeline.tasks.grammar import Grammar, GrammarError

SVO_SAMPLE = ("si1 vi28 oi5 oi7 si15 rpi si19 vi16 oi10 oi24",
              "so1 oo5 oo7 so15 rpo so19 vo16 oo10 oo24 vo28")
GENDER_SAMPLE = ("we11 the en19 and the em17", "wg11 das gn19 und der gm17")


def grammar(name):
    return get_task(name).grammar


def tiny(**overrides):
    """A valid two-rule grammar to mutate in the validation tests."""
    data = {"start": "A",
            "rules": {"A": [{"p": "1/2", "rule": "X1 A2 | A2 X1"}, {"p": "1/2", "rule": "X1 | X1"}]},
            "terminal_classes": {"X": {"size": 3, "source": "x{i}", "target": "y{i}"}}}
    data.update(overrides)
    return data


@pytest.mark.parametrize("name, sample", [("svo_sov", SVO_SAMPLE), ("gender", GENDER_SAMPLE)])
def test_the_papers_sample_is_derivable_from_the_start_symbol(name, sample):
    source, target = (side.split() for side in sample)
    assert tuple(target) in grammar(name).translations(source)


def test_parser_rejects_pairs_the_grammar_cannot_derive():
    source, target = (side.split() for side in SVO_SAMPLE)
    unmoved = [w.replace("i", "o", 1) if w != "rpi" else "rpo" for w in source]  # verb left in place
    assert tuple(unmoved) not in grammar("svo_sov").translations(source)
    assert grammar("svo_sov").translations(["si1", "oi5", "vi28"]) == set()  # SOV source is not English here
    source, target = (side.split() for side in GENDER_SAMPLE)
    assert grammar("gender").translations(source) == {tuple(target)}  # the article is forced by the noun
    assert grammar("gender").translations(["the", "en19"]) == set()  # a lone noun is not a sentence


@pytest.mark.parametrize("name", ["svo_sov", "gender"])
def test_every_sampled_pair_is_derivable_by_the_parser(name):
    g = grammar(name)
    for source, target in g.sample(np.random.default_rng(7), 150, 8, 24):
        words = [g.source_vocab[i] for i in source]
        assert tuple(g.target_vocab[i] for i in target) in g.translations(words)


@pytest.mark.parametrize("name, sizes", [("svo_sov", (100, 100)), ("gender", (104, 107))])
def test_vocabularies_are_fixed_by_the_grammar(name, sizes):
    g = grammar(name)
    assert (len(g.source_vocab), len(g.target_vocab)) == sizes
    assert len(set(g.source_vocab)) == sizes[0] and len(set(g.target_vocab)) == sizes[1]
    assert g.preserves_length


def test_terminal_classes_have_the_papers_sizes_and_spellings():
    svo = grammar("svo_sov").classes
    assert {name: len(c.source) for name, c in svo.items()} == {"ST": 33, "OT": 33, "VT": 33}
    assert svo["VT"].source[27] == "vi28" and svo["VT"].target[27] == "vo28"
    gender = grammar("gender").classes
    assert {name: len(c.source) for name, c in gender.items()} == {"W": 25, "M": 25, "F": 25, "N": 25}
    assert (gender["N"].source[18], gender["N"].target[18]) == ("en19", "gn19")


def test_samples_respect_the_window_and_come_from_a_seed():
    g = grammar("svo_sov")
    first = g.sample(np.random.default_rng(3), 50, 20, 30)
    assert all(20 <= len(s) <= 30 and len(s) == len(t) for s, t in first)
    assert g.sample(np.random.default_rng(3), 50, 20, 30) == first
    assert g.sample(np.random.default_rng(4), 50, 20, 30) != first


def test_abandoning_long_derivations_early_is_the_same_as_rejecting_them():
    """The sampler stops a derivation once it must exceed the window; that must not bias what is kept. Compare
    lengths sampled into 8..16 with complete derivations (no cut-off) that happen to land there."""
    g = grammar("svo_sov")
    windowed = np.array([len(s) for s, _ in g.sample(np.random.default_rng(0), 3000, 8, 16)])
    complete = g.sample_lengths(np.random.default_rng(1), 15000, max_length=10**6)
    assert complete.max() <= 10**6  # nothing was cut off: these are whole derivations
    complete = complete[(complete >= 8) & (complete <= 16)]
    assert len(complete) > 2500
    for length in range(8, 17):
        assert abs(np.mean(windowed == length) - np.mean(complete == length)) < 0.03


def test_depth_bound_makes_a_supercritical_grammar_terminate():
    data = tiny(rules={"A": [{"p": 0.9, "rule": "A1 A2 | A2 A1"}, {"p": 0.1, "rule": "X1 | X1"}]}, max_depth=12)
    g = Grammar.from_dict(data, "explosive")
    lengths = g.sample_lengths(np.random.default_rng(0), 200, max_length=10**9)
    assert (lengths == 10**9 + 1).mean() > 0.5  # most derivations are abandoned at depth 12 ...
    assert lengths.max() == 10**9 + 1 and lengths.min() >= 1  # ... and every call returned


def test_an_unreachable_window_is_an_error_not_a_hang():
    g = Grammar.from_dict(tiny(rules={"A": [{"p": 1, "rule": "X1 X2 | X2 X1"}]}), "two_words")
    with pytest.raises(RuntimeError, match=r"length 3\.\.5"):
        g.sample(np.random.default_rng(0), 1, 3, 5, max_attempts=100)


def test_linked_symbols_share_one_sub_derivation():
    g = Grammar.from_dict(tiny(), "mirror")  # A -> X A | A X: the target is the reversed source, x_i -> y_i
    for source, target in g.sample(np.random.default_rng(0), 100, 1, 30):
        words = [g.source_vocab[i] for i in source]
        assert [g.target_vocab[i] for i in target] == [w.replace("x", "y") for w in reversed(words)]


def test_fingerprint_follows_the_probabilities():
    base = Grammar.from_dict(tiny(), "g").fingerprint()
    assert Grammar.from_dict(tiny(), "g").fingerprint() == base
    retuned = tiny(rules={"A": [{"p": "1/3", "rule": "X1 A2 | A2 X1"}, {"p": "2/3", "rule": "X1 | X1"}]})
    assert Grammar.from_dict(retuned, "g").fingerprint() != base


@pytest.mark.parametrize("data, message", [
    (tiny(colour="red"), r"unknown key\(s\) \['colour'\]"),
    (tiny(rules={"A": [{"p": 1, "rule": "X1 | X1", "weight": 2}]}), r"exactly the keys \['p', 'rule'\]"),
    (tiny(rules={"A": [{"p": "1/2", "rule": "X1 | X1"}, {"p": "1/3", "rule": "X1 X2 | X2 X1"}]}),
     r"'A': probabilities sum to 0.833333, not 1"),
    (tiny(rules={"A": [{"p": 1, "rule": "X1 B2 | B2 X1"}]}), r"rule A -> 'X1 B2 \| B2 X1': undefined non-terminal 'B'"),
    (tiny(rules={"A": [{"p": 1, "rule": "X1 X1 | X1 X1"}]}), r"link index 1 appears twice on the source side"),
    (tiny(rules={"A": [{"p": 1, "rule": "X1 X2 | X1"}]}), r"linked non-terminals differ between the sides"),
    (tiny(rules={"A": [{"p": 1, "rule": "X1 A2 | X1 X2"}]}), r"linked non-terminals differ between the sides"),
    (tiny(rules={"A": [{"p": 1, "rule": "X1 X2"}]}), r"expected 'source side \| target side'"),
    (tiny(rules={"A": [{"p": "a lot", "rule": "X1 | X1"}]}), r"probability 'a lot' is not a number"),
    (tiny(rules={"A": [{"p": 1, "rule": "A1 X2 | A1 X2"}]}), r"\['A'\] can never finish"),
    (tiny(rules={"A": [{"p": "1/2", "rule": "B1 | B1"}, {"p": "1/2", "rule": "X1 | X1"}],
                 "B": [{"p": 1, "rule": "A1 | A1"}]}), r"unary cycle A -> B -> A"),
    (tiny(start="Q"), r"start symbol 'Q' is not a non-terminal"),
    (tiny(terminal_classes={"X": {"size": 3, "source": "x", "target": "y{i}"}}), r"containing '\{i\}'"),
    (tiny(rules={"A": [{"p": 1, "rule": "x1 X1 | y1 X1"}]}), r"words \['x1'\] of terminal class 'X'"),
])
def test_invalid_grammars_are_rejected_with_a_message_naming_the_problem(data, message):
    with pytest.raises(GrammarError, match=message):
        Grammar.from_dict(data, "bad", origin="bad.yaml")


def test_grammar_files_are_named_in_errors(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("start: A\nrules: {A: [{p: 1, rule: 'B1 | B1'}]}\nterminal_classes: {}\n")
    with pytest.raises(GrammarError, match=re.escape(f"{path}: rule A -> 'B1 | B1': undefined non-terminal 'B'")):
        Grammar.from_yaml(path)


def test_a_grammars_unknown_keys_of_mixed_types_are_named_not_a_traceback():
    """Issue 80: keys YAML 1.1 reads as bools beside string keys are named, never a TypeError from sorting them."""
    data = {"start": "S", "rules": {"S": [{"p": 1.0, "rule": "A1 | A1"}]}, True: 1, "bogus": 2,
            "terminal_classes": {"A": {"size": 2, "source": "a{i}", "target": "b{i}"}}}
    with pytest.raises(GrammarError, match=r"unknown key\(s\) \['bogus', True\]"):
        Grammar.from_dict(data, name="g")


# ------------------------------------------------------------------------ the target's probability alone

AMBIGUOUS = {"start": "A",
             "rules": {"A": [{"p": "1/2", "rule": "A1 A2 | A2 A1"}, {"p": "1/4", "rule": "B1 | B1"},
                             {"p": "1/4", "rule": "X1 k A2 | A2 kk X1"}],
                       "B": [{"p": "2/3", "rule": "X1 | X1"}, {"p": "1/3", "rule": "X1 X2 | X1 q X2"}]},
             "terminal_classes": {"X": {"size": 2, "source": "x{i}", "target": "y{i}"}}}


def enumerate_targets(g, symbol, budget):
    """Every derivation of ``symbol`` with at most ``budget`` source words, as (target words, probability): the
    literal definition of the target's probability, by brute force."""
    if symbol in g.classes:
        words = g.classes[symbol].target
        return [((w,), 1 / len(words), 1) for w in words]
    out = []
    for rule in g.rules[symbol]:
        links, fixed = rule.links, sum(isinstance(x, str) for x in rule.source)

        def expand(k, left, links=links):
            if k == len(links):
                yield {}, 1.0, 0
                return
            for words, p, n in enumerate_targets(g, links[k].symbol, left - (len(links) - k - 1)):
                for rest, q, m in expand(k + 1, left - n):
                    yield {links[k].index: words, **rest}, p * q, n + m

        if budget >= fixed + len(links):
            for sub, p, n in expand(0, budget - fixed):
                target = tuple(w for x in rule.target for w in (sub[x.index] if not isinstance(x, str) else (x,)))
                out.append((target, rule.p * p, n + fixed))
    return out


def test_a_targets_probability_sums_every_derivation_that_yields_it():
    # An ambiguous grammar that reorders (A -> A A swapped), inserts literals on one side only and chains unary
    # rules: the inside algorithm against brute-force enumeration of every derivation up to 5 source words.
    g = Grammar.from_dict(AMBIGUOUS, name="ambiguous")
    totals, derivations = {}, {}
    for target, p, _ in enumerate_targets(g, "A", 5):
        totals[target] = totals.get(target, 0.0) + p
        derivations[target] = derivations.get(target, 0) + 1
    assert sum(n > 1 for n in derivations.values()) > 50  # many targets have several derivations to sum
    for target, p in totals.items():
        assert g.target_probability(target) == pytest.approx(p, rel=1e-12)
    # the enumeration is complete: it holds all the probability of lengths 1..5 the length tables give
    lengths = g.length_sampler(5).length_probabilities()
    assert sum(totals.values()) == pytest.approx(lengths[1:6].sum(), rel=1e-12)
    assert g.target_probability(("y1", "y2", "q")) == 0.0  # q only ever stands between two words
    assert g.target_probability(("y1", "q", "y2")) == pytest.approx(1 / 4 * 1 / 3 * 1 / 4)


def test_the_papers_sample_targets_have_a_probability_and_a_reordered_one_has_none():
    for name, (_, target) in (("svo_sov", SVO_SAMPLE), ("gender", GENDER_SAMPLE)):
        assert grammar(name).target_probability(target.split()) > 0
    verb_first = "vo28 so1 oo5".split()
    assert grammar("svo_sov").target_probability(verb_first) == 0.0


def counting_task(distribution):
    """Sentences of x's of any length, each word from a class of 4: a target's probability is known in closed form."""
    from pipeline.tasks.itg import GrammarTask

    g = Grammar.from_dict({"start": "A", "rules": {"A": [{"p": "1/2", "rule": "X1 A2 | X1 A2"},
                                                         {"p": "1/2", "rule": "X1 | X1"}]},
                           "terminal_classes": {"X": {"size": 4, "source": "x{i}", "target": "y{i}"}}},
                          name="counting")
    return GrammarTask("counting", g, distribution)


@pytest.mark.parametrize("distribution", ["uniform", "grammar"])
def test_reference_perplexities_are_the_closed_form_on_a_grammar_that_only_counts(distribution):
    task = counting_task(distribution)
    reference = task.reference_perplexities(samples=300, seed=3)
    lengths = np.array([len(p.target) for p in task.sample_window(np.random.default_rng(3), (8, 64), 300)])
    tokens = (lengths + 1).sum()
    # every word is a content word of a class of 4; nothing else is to be predicted but </s>
    assert reference.skeleton == pytest.approx(np.exp(lengths.sum() * np.log(4) / tokens), rel=1e-12)
    if distribution == "uniform":  # P(target) = 1/57 lengths * 4^-L: the skeleton is the length, drawn uniformly
        nats = len(lengths) * np.log(57) + lengths.sum() * np.log(4)
    else:  # P(target) = 2^-L 4^-L / P(8 <= L <= 64)
        window = sum(0.5 ** n for n in range(8, 65))
        nats = (lengths * np.log(8)).sum() + len(lengths) * np.log(window)
    assert reference.source_unread == pytest.approx(np.exp(nats / tokens), rel=1e-12)
    assert reference.samples == 300 and reference.seed == 3
    assert 0 < reference.skeleton_error < 0.05 and 0 < reference.source_unread_error < 0.05
