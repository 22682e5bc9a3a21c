"""Exact sampling of a grammar's derivations *given their source length*, and the grammar's length distribution.

§4.2 says the grammars were tuned "so that the grammars generate left and right sequences of lengths 8 to 128
with relatively uniform distribution". No choice of rule probabilities makes a recursive grammar's lengths flat
(docs/tasks.md), but a length can be drawn first, uniformly over a window, and a derivation of exactly that length
drawn from the grammar's own distribution conditioned on it. That needs the *inside* probabilities

    inside[X, n] = P(symbol X derives exactly n source words)
                 = sum over rules X -> a1 ... ak (prob p) of  p * sum over n1 + ... + nk = n of prod inside[ai, ni]

(a literal word derives 1 word with probability 1, so does a terminal class). A derivation of X with n words is
then drawn top-down: a rule with probability p * W(rule, n) / inside[X, n], where W sums the products above over
the ways of splitting n among the rule's symbols; then the length of each linked symbol in turn, given the words
still to place; then each child given its length. Every choice is proportional to the grammar's probability of
what it leads to, so a derivation of length n comes out with exactly its probability under the grammar
conditioned on length n — what rejection sampling at one length would give, without the rejections. The
``max_depth`` cut-off of the rejection sampler is not applied here (it never binds below 256 words).

The tables cost O(symbols × rules × N²) once per grammar (milliseconds for N = 256); a draw costs a few
microseconds per node of the tree, because every cumulative distribution it bisects is built once and cached.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pipeline.tasks.grammar import Grammar


class LengthConditionedSampler:
    """Derivation trees of a :class:`Grammar` with a given source length, and the grammar's length distribution.

    Trees have the sampler's node form (``[symbol id, compiled rule or word index, children]``), so that
    ``Grammar._linearize`` reads them like the rejection sampler's.
    """

    def __init__(self, grammar: Grammar, max_length: int):
        self.grammar = grammar
        self.max_length = max_length
        n_nonterminals = len(grammar._choices)
        n_symbols = n_nonterminals + len(grammar._class_sizes)
        self._n_nonterminals = n_nonterminals
        # Each compiled rule as (probability, fixed words, linked symbol ids in source order).
        self._rules = []
        for cumulative, compiled in grammar._choices:
            probabilities = np.diff([0.0, *cumulative])
            self._rules.append([(float(p), sum(1 for x in rule.source if x >= 0), rule.children, rule)
                                for p, rule in zip(probabilities, compiled)])
        N = max_length
        inside = np.zeros((n_symbols, N + 1))
        inside[n_nonterminals:, 1] = 1.0  # a terminal class is one word
        # suffix[rule key][j][m]: P(children j.. of the rule derive m words together); key = (symbol, rule index).
        self._suffix = {(s, r): np.zeros((len(rule[2]) + 1, N + 1)) for s in range(n_nonterminals)
                        for r, rule in enumerate(self._rules[s])}
        for table in self._suffix.values():
            table[-1, 0] = 1.0  # no children left: zero words, with certainty
        order = self._unary_order()
        for n in range(1, N + 1):
            # Every symbol derives at least one word, so when two or more children share n words each gets fewer
            # than n: those suffixes need only earlier columns. The last child alone needs inside[., n] itself.
            lengths = np.arange(1, n)
            for (symbol, r), table in self._suffix.items():
                children = self._rules[symbol][r][2]
                for j in range(len(children) - 2, -1, -1):
                    table[j, n] = float(inside[children[j], lengths] @ table[j + 1, n - lengths])
            # inside[X, n] needs inside[Y, n] only through a unary rule X -> Y1 (no literals), acyclic by the
            # grammar's validation: visit those first.
            for symbol in order:
                inside[symbol, n] = sum(p * self._ways(symbol, r, n - fixed, inside)
                                        for r, (p, fixed, _, _) in enumerate(self._rules[symbol]))
            for (symbol, r), table in self._suffix.items():
                children = self._rules[symbol][r][2]
                if children:
                    table[len(children) - 1, n] = inside[children[-1], n]
        self.inside = inside
        self._rule_cdf: dict[tuple[int, int], tuple[list[float], float]] = {}
        self._split_cdf: dict[tuple[int, int, int, int], tuple[list[float], float, int]] = {}

    def _ways(self, symbol: int, r: int, m: int, inside: np.ndarray) -> float:
        """P(the children of rule r of ``symbol`` derive m words together), at the current step of the table."""
        if m < 0:
            return 0.0
        children = self._rules[symbol][r][2]
        if len(children) == 1:
            return float(inside[children[0], m])
        return float(self._suffix[symbol, r][0, m]) if m < inside.shape[1] else 0.0

    def _unary_order(self) -> list[int]:
        """Non-terminals ordered so that the target of every unary rule X -> Y1 comes before X."""
        edges = {s: {rule[2][0] for rule in self._rules[s] if rule[1] == 0 and len(rule[2]) == 1
                     and rule[2][0] < self._n_nonterminals} for s in range(self._n_nonterminals)}
        order: list[int] = []
        seen: set[int] = set()

        def visit(s: int) -> None:
            if s in seen:
                return
            seen.add(s)
            for t in sorted(edges[s]):
                visit(t)
            order.append(s)

        for s in range(self._n_nonterminals):
            visit(s)
        return order

    # -------------------------------------------------------------------------------------------- lengths

    def length_probabilities(self) -> np.ndarray:
        """``p[n]``: probability that the start symbol derives exactly n source words, n = 0 .. max_length."""
        return self.inside[self.grammar._start_id].copy()

    def possible_lengths(self, low: int, high: int) -> np.ndarray:
        """The lengths in ``low..high`` the grammar can derive (probability > 0), ascending."""
        p = self.inside[self.grammar._start_id]
        return np.array([n for n in range(low, high + 1) if p[n] > 0], dtype=np.int64)

    # ------------------------------------------------------------------------------------------- drawing

    def derive(self, uniforms: Iterator[float], length: int) -> list:
        """A derivation tree of the start symbol with exactly ``length`` source words."""
        if not 1 <= length <= self.max_length or self.inside[self.grammar._start_id, length] <= 0:
            raise ValueError(f"grammar {self.grammar.name!r} derives no sentence of length {length}")
        root = [self.grammar._start_id, None, None]
        pending = [(root, length)]
        n_nonterminals = self._n_nonterminals
        while pending:
            node, n = pending.pop()
            symbol = node[0]
            if symbol >= n_nonterminals:  # a terminal class: one word, uniform over the class
                node[1] = int(next(uniforms) * self.grammar._class_sizes[symbol - n_nonterminals])
                continue
            r = self._choose_rule(symbol, n, next(uniforms))
            _, fixed, children, compiled = self._rules[symbol][r]
            nodes = [[child, None, None] for child in children]
            node[1], node[2] = compiled, nodes
            remaining = n - fixed
            for j, child in enumerate(nodes):
                size = remaining if j == len(nodes) - 1 else self._choose_split(symbol, r, j, remaining,
                                                                                next(uniforms))
                pending.append((child, size))
                remaining -= size
        return root

    def _choose_rule(self, symbol: int, n: int, u: float) -> int:
        key = (symbol, n)
        if key not in self._rule_cdf:
            weights = [p * self._ways(symbol, r, n - fixed, self.inside)
                       for r, (p, fixed, _, _) in enumerate(self._rules[symbol])]
            self._rule_cdf[key] = (list(np.cumsum(weights)), sum(weights))
        cumulative, total = self._rule_cdf[key]
        return min(bisect.bisect_right(cumulative, u * total), len(cumulative) - 1)

    def _choose_split(self, symbol: int, r: int, j: int, m: int, u: float) -> int:
        """Words for child j of rule r when children j.. share m words: weight inside[c_j, a] * suffix[j+1, m-a]."""
        key = (symbol, r, j, m)
        if key not in self._split_cdf:
            child = self._rules[symbol][r][2][j]
            lengths = np.arange(1, m + 1)
            weights = self.inside[child, lengths] * self._suffix[symbol, r][j + 1, m - lengths]
            self._split_cdf[key] = (list(np.cumsum(weights)), float(weights.sum()), 1)
        cumulative, total, first = self._split_cdf[key]
        return first + min(bisect.bisect_right(cumulative, u * total), len(cumulative) - 1)
