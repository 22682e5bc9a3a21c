"""A small synchronous context-free grammar engine for the paper's ITG tasks (§4.2, appendix C, Table 1).

A grammar is data (YAML under ``configs/grammars/``), written the way Table 1 prints it::

    start: A
    max_depth: 512
    rules:
      A:
        - {p: 1, rule: "S1 VT2 O3 | S1 O3 VT2"}
      S:
        - {p: 1/5, rule: "S1 rpi S2 VT3 | S1 rpo S2 VT3"}
        ...
    terminal_classes:
      VT: {size: 33, source: "vi{i}", target: "vo{i}"}

Each rule is ``source side | target side``. A token ``NAME<k>`` (upper-case name, then digits) is a *linked*
symbol: the same ``k`` on both sides names one shared sub-derivation, which is how the target side reorders the
source side. Any other token is a literal word of that side's language. A terminal class ``X`` with ``size`` n
expands to the word pair ``(source.format(i), target.format(i))`` for ``i`` uniform over ``1..n``.

Sampling is exact rejection sampling on the source length: a derivation is abandoned as soon as the words it has
emitted plus the fewest words its unexpanded symbols can still produce exceed the maximum length (the same result
as generating the whole sentence and rejecting it, without paying for the tail), and one deeper than
``max_depth`` is abandoned as well, which guarantees that every attempt terminates whatever the probabilities.
Abandoning rather than forcing non-recursive rules at the depth bound leaves the distribution of the accepted
sentences exactly the grammar's, conditioned on the bound; ``max_depth`` is set well above the depth any sentence
of at most 256 words needs, so in practice it never binds.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import yaml

from pipeline.files import parse_yaml
from pipeline.tasks.length_conditioned import LengthConditionedSampler

_LINK = re.compile(r"^([A-Z][A-Za-z]*)(\d+)$")
_TOP_KEYS = {"description", "start", "max_depth", "rules", "terminal_classes"}
_RULE_KEYS = {"p", "rule"}
_CLASS_KEYS = {"size", "source", "target"}


class GrammarError(ValueError):
    """A grammar file that cannot be used; the message names the file and the offending rule or key."""


@dataclass(frozen=True)
class Link:
    """A linked symbol ``symbol<index>`` on one side of a rule."""

    symbol: str
    index: int


@dataclass(frozen=True)
class Rule:
    """``lhs -> source | target`` with probability ``p``; items are literal words (str) or :class:`Link`."""

    lhs: str
    p: float
    source: tuple[str | Link, ...]
    target: tuple[str | Link, ...]
    text: str

    @property
    def links(self) -> tuple[Link, ...]:
        """The linked symbols in source order (one sub-derivation each)."""
        return tuple(item for item in self.source if isinstance(item, Link))


@dataclass(frozen=True)
class TerminalClass:
    """``X_i -> source_i | target_i`` for i in 1..size, each equiprobable."""

    name: str
    source: tuple[str, ...]
    target: tuple[str, ...]


@dataclass(frozen=True)
class _Compiled:
    """A rule in the sampler's integer form: words are vocabulary ids (>= 0), child k is written ``~k`` (< 0)."""

    source: tuple[int, ...]
    target: tuple[int, ...]
    children: tuple[int, ...]  # symbol id of each child, in source order
    growth: int  # fewest words this rule adds over the fewest words its left-hand side could produce


class Grammar:
    """A validated synchronous grammar: sample sentence pairs, parse a source sentence, list vocabularies."""

    def __init__(self, name: str, start: str, max_depth: int, rules: dict[str, tuple[Rule, ...]],
                 classes: dict[str, TerminalClass], origin: str = "<grammar>"):
        self.name = name
        self.start = start
        self.max_depth = max_depth
        self.rules = rules
        self.classes = classes
        self.source_vocab, self.target_vocab = self._vocabularies(origin)
        self.min_length = self._min_lengths(origin)
        cycle = self._unary_cycle()
        if cycle:
            raise GrammarError(f"{origin}: unary cycle {' -> '.join(cycle)}: a derivation could grow forever "
                               "without emitting words")
        self._compile()
        self._length_samplers: dict[int, LengthConditionedSampler] = {}

    # ----------------------------------------------------------------------------------------- loading

    @classmethod
    def from_yaml(cls, path: str | Path) -> Grammar:
        path = Path(path)
        try:
            data = parse_yaml(path.read_text())
        except (OSError, yaml.YAMLError) as error:
            raise GrammarError(f"{path}: cannot read grammar: {error}") from error
        return cls.from_dict(data, name=path.stem, origin=str(path))

    @classmethod
    def from_dict(cls, data: object, name: str, origin: str = "<grammar>") -> Grammar:
        """Validate ``data`` (the parsed YAML) and build the grammar; every error names ``origin`` and the rule."""

        def fail(message: str) -> GrammarError:
            return GrammarError(f"{origin}: {message}")

        if not isinstance(data, dict):
            raise fail("expected a mapping with keys " + ", ".join(sorted(_TOP_KEYS)))
        unknown = set(data) - _TOP_KEYS
        if unknown:
            raise fail(f"unknown key(s) {sorted(unknown, key=repr)}; allowed: {sorted(_TOP_KEYS)}")
        for key in ("start", "rules", "terminal_classes"):
            if key not in data:
                raise fail(f"missing key {key!r}")
        max_depth = data.get("max_depth", 512)
        if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 1:
            raise fail(f"max_depth must be a positive integer, got {max_depth!r}")

        classes = {}
        if not isinstance(data["terminal_classes"], dict):
            raise fail("terminal_classes must map class names to {size, source, target}")
        for class_name, spec in data["terminal_classes"].items():
            where = f"terminal class {class_name!r}"
            if not isinstance(class_name, str) or not re.fullmatch(r"[A-Z][A-Za-z]*", class_name):
                raise fail(f"{where}: names must be upper-case letters (they are written {class_name}1, ...)")
            if not isinstance(spec, dict) or set(spec) != _CLASS_KEYS:
                raise fail(f"{where}: expected exactly the keys {sorted(_CLASS_KEYS)}, got {spec!r}")
            size = spec["size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise fail(f"{where}: size must be a positive integer, got {size!r}")
            words = {}
            for side in ("source", "target"):
                template = spec[side]
                if not isinstance(template, str) or "{i}" not in template:
                    raise fail(f"{where}: {side} must be a word template containing '{{i}}', got {template!r}")
                words[side] = tuple(template.format(i=i) for i in range(1, size + 1))
            classes[class_name] = TerminalClass(class_name, words["source"], words["target"])

        if not isinstance(data["rules"], dict) or not data["rules"]:
            raise fail("rules must map each non-terminal to a list of {p, rule}")
        overlap = set(data["rules"]) & set(classes)
        if overlap:
            raise fail(f"{sorted(overlap)} defined both as non-terminal and as terminal class")
        symbols = set(data["rules"]) | set(classes)
        rules = {}
        for lhs, entries in data["rules"].items():
            if not isinstance(lhs, str) or not re.fullmatch(r"[A-Z][A-Za-z]*", lhs):
                raise fail(f"non-terminal {lhs!r}: names must be upper-case letters")
            if not isinstance(entries, list) or not entries:
                raise fail(f"non-terminal {lhs!r}: expected a non-empty list of {{p, rule}}")
            parsed = tuple(_parse_rule(lhs, entry, symbols, fail) for entry in entries)
            total = sum(rule.p for rule in parsed)
            if abs(total - 1.0) > 1e-9:
                listing = "; ".join(f"{rule.p:g}: {rule.text}" for rule in parsed)
                raise fail(f"non-terminal {lhs!r}: probabilities sum to {total:g}, not 1 ({listing})")
            rules[lhs] = parsed
        if data["start"] not in rules:
            raise fail(f"start symbol {data['start']!r} is not a non-terminal; defined: {sorted(rules)}")
        return cls(name, data["start"], max_depth, rules, classes, origin)

    def fingerprint(self) -> str:
        """A digest of everything that determines the sampled data: retuning a probability changes it."""
        canonical = {
            "start": self.start,
            "max_depth": self.max_depth,
            "rules": {lhs: [[rule.p, rule.text] for rule in rules] for lhs, rules in self.rules.items()},
            "classes": {c.name: [c.source, c.target] for c in self.classes.values()},
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def preserves_length(self) -> bool:
        """True when every rule has as many items on the target side as on the source side."""
        return all(len(rule.source) == len(rule.target) for rules in self.rules.values() for rule in rules)

    # ------------------------------------------------------------------------------------- sampling

    def sample(self, rng: np.random.Generator, n: int, min_length: int, max_length: int,
               max_attempts: int = 1_000_000) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """``n`` (source ids, target ids) pairs with ``min_length <= len(source) <= max_length``, by rejection."""
        if not 1 <= min_length <= max_length:
            raise ValueError(f"need 1 <= min_length <= max_length, got [{min_length}, {max_length}]")
        uniforms = _uniforms(rng)
        pairs = []
        for _ in range(n):
            for _attempt in range(max_attempts):
                root, length = self._derive(uniforms, max_length)
                if root is not None and length >= min_length:
                    pairs.append((self._linearize(root, 0), self._linearize(root, 1)))
                    break
            else:
                raise RuntimeError(f"grammar {self.name!r}: no sentence of length {min_length}..{max_length} "
                                   f"in {max_attempts} attempts")
        return pairs

    def sample_uniform_lengths(self, rng: np.random.Generator, n: int, min_length: int, max_length: int
                               ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """``n`` pairs whose source length is uniform over the lengths in ``min_length..max_length`` the grammar can
        derive, each drawn from the grammar's distribution conditioned on its length (exact, no rejection:
        :mod:`pipeline.tasks.length_conditioned`)."""
        if not 1 <= min_length <= max_length:
            raise ValueError(f"need 1 <= min_length <= max_length, got [{min_length}, {max_length}]")
        sampler = self.length_sampler(max_length)
        lengths = sampler.possible_lengths(min_length, max_length)
        if not len(lengths):
            raise ValueError(f"grammar {self.name!r} derives no sentence of length {min_length}..{max_length}")
        uniforms = _uniforms(rng)
        pairs = []
        for _ in range(n):
            root = sampler.derive(uniforms, int(lengths[int(next(uniforms) * len(lengths))]))
            pairs.append((self._linearize(root, 0), self._linearize(root, 1)))
        return pairs

    def length_sampler(self, max_length: int) -> LengthConditionedSampler:
        """The inside tables up to ``max_length`` words, built once per grammar: a table already built for a longer
        window serves a shorter one (its entries up to ``max_length`` are the same numbers)."""
        found = next((s for n, s in sorted(self._length_samplers.items()) if n >= max_length), None)
        if found is None:
            found = self._length_samplers[max_length] = LengthConditionedSampler(self, max_length)
        return found

    def sample_lengths(self, rng: np.random.Generator, n: int, max_length: int) -> np.ndarray:
        """Source lengths of ``n`` unconditioned derivations; those longer than ``max_length`` (or deeper than
        ``max_depth``) are reported as ``max_length + 1``. This is the distribution before any rejection."""
        uniforms = _uniforms(rng)
        lengths = np.empty(n, dtype=np.int64)
        for k in range(n):
            root, length = self._derive(uniforms, max_length)
            lengths[k] = max_length + 1 if root is None else length
        return lengths

    def _derive(self, uniforms: Iterator[float], max_length: int) -> tuple[list | None, int]:
        """One top-down derivation tree and its source length; the tree is None once the derivation must exceed
        ``max_length`` words or ``max_depth``. The length is counted without building the sentence, because most
        derivations are rejected."""
        n_nonterminals = len(self._choices)
        root = [self._start_id, None, None]  # [symbol id, rule or word index, children]
        pending = [(root, 0)]
        length = self._min_by_id[self._start_id]
        while pending:
            node, depth = pending.pop()
            symbol = node[0]
            if symbol >= n_nonterminals:  # terminal class: pick the word index
                node[1] = int(next(uniforms) * self._class_sizes[symbol - n_nonterminals])
                continue
            if depth >= self.max_depth:
                return None, length
            cumulative, compiled = self._choices[symbol]
            rule = compiled[min(bisect.bisect_right(cumulative, next(uniforms)), len(compiled) - 1)]
            length += rule.growth
            if length > max_length:
                return None, length
            children = [[child, None, None] for child in rule.children]
            node[1], node[2] = rule, children
            pending += [(child, depth + 1) for child in children]
        return root, length

    def _linearize(self, root: list, side: int) -> tuple[int, ...]:
        offsets = self._class_offsets[side]
        n_nonterminals = len(self._choices)
        out: list[int] = []
        stack: list = [root]
        while stack:
            item = stack.pop()
            if type(item) is int:
                out.append(item)
                continue
            symbol, choice, children = item
            if children is None:
                out.append(offsets[symbol - n_nonterminals] + choice)
                continue
            for element in reversed(choice.source if side == 0 else choice.target):
                stack.append(element if element >= 0 else children[~element])
        return tuple(out)

    # -------------------------------------------------------------------------------------- parsing

    def translations(self, source: Sequence[str], symbol: str | None = None) -> set[tuple[str, ...]]:
        """Every target sentence the grammar pairs with ``source`` (words) when derived from ``symbol``.

        A chart parser independent of the sampler: it checks each rule application top-down over source spans,
        so ``target in grammar.translations(source)`` proves a pair derivable. Cubic in the length for the
        paper's grammars; meant for checking sentences of a few dozen words, not for bulk use.
        """
        words = tuple(source)
        class_of = {}
        for terminal_class in self.classes.values():
            for src, tgt in zip(terminal_class.source, terminal_class.target):
                class_of[terminal_class.name, src] = tgt

        @cache
        def parse(symbol: str, i: int, j: int) -> frozenset[tuple[str, ...]]:
            if symbol in self.classes:
                target = class_of.get((symbol, words[i])) if j == i + 1 else None
                return frozenset() if target is None else frozenset({(target,)})
            found = set()
            for rule in self.rules[symbol]:
                for spans in self._splits(rule.source, words, i, j):
                    options = [parse(link.symbol, *spans[link.index]) for link in rule.links]
                    for choice in itertools.product(*options):
                        sub = {link.index: words_ for link, words_ in zip(rule.links, choice)}
                        found.add(tuple(itertools.chain.from_iterable(
                            sub[item.index] if isinstance(item, Link) else (item,) for item in rule.target)))
            return frozenset(found)

        return set(parse(symbol or self.start, 0, len(words))) if words else set()

    def _splits(self, items: tuple[str | Link, ...], words: tuple[str, ...], i: int, j: int):
        """Ways to cover ``words[i:j]`` with ``items``: literals must match, links get spans of feasible length."""
        if not items:
            if i == j:
                yield {}
            return
        head, rest = items[0], items[1:]
        rest_min = sum(1 if isinstance(item, str) else self.min_length[item.symbol] for item in rest)
        if isinstance(head, str):
            if i < j and words[i] == head:
                yield from self._splits(rest, words, i + 1, j)
            return
        for end in range(i + self.min_length[head.symbol], j - rest_min + 1):
            for spans in self._splits(rest, words, end, j):
                yield {head.index: (i, end), **spans}

    # ------------------------------------------------------------------------- target-side probability

    def target_probability(self, target: Sequence[str], symbol: str | None = None) -> float:
        """P(``symbol`` derives ``target`` on the target side): the grammar's probability of the target sentence
        alone, summed over every derivation that yields it (the grammars are ambiguous: ``S -> S S`` splits
        ``so so so`` two ways). What a model that reads no source word can at best assign to a target.

        The inside algorithm over the target sides of the rules: ``inside[X][i, j]`` = P(X derives words i..j-1),
        filled by span length; a rule ``X -> a1 ... ak`` contributes p * sum over split points of the product of
        its items' inside values, built left to right through the rule's prefixes (``prefix[r][t][i, j]``: items
        1..t derive words i..j-1), vectorised over the start i. Every item derives at least one word, so a span's
        entries use shorter spans only, except single-item rules, taken in the order of :meth:`_target_unary_order`.
        A terminal class derives one of its words with probability 1/size, a literal itself with probability 1.
        Cubic in the length; a sentence of 64 words takes milliseconds."""
        words = tuple(target)
        n = len(words)
        if n == 0:
            return 0.0
        # what derives one word: each terminal class (any of its words, 1/size each) and each literal (itself)
        emitters = {name: (set(c.target), 1.0 / len(c.target)) for name, c in self.classes.items()}
        emitters.update({item: ({item}, 1.0) for rules in self.rules.values() for rule in rules
                         for item in rule.target if isinstance(item, str)})
        tables: dict[str, np.ndarray] = {}
        for name, (members, p) in emitters.items():
            tables[name] = np.zeros((n + 1, n + 1))
            for i, word in enumerate(words):
                if word in members:
                    tables[name][i, i + 1] = p
        for name in self.rules:
            tables[name] = np.zeros((n + 1, n + 1))

        def table_of(item: str | Link) -> np.ndarray:
            return tables[item.symbol if isinstance(item, Link) else item]

        order = self._target_unary_order()
        prefixes = {(lhs, r): [np.zeros((n + 1, n + 1)) for _ in rule.target[1:]]
                    for lhs, rules in self.rules.items() for r, rule in enumerate(rules)}
        for d in range(1, n + 1):
            starts = np.arange(n - d + 1)
            if d >= 2:
                # split points m = i + t, t = 1 .. d-1: left part i..m, right part m..i+d, both shorter than d
                m = starts[:, None] + np.arange(1, d)[None, :]
                ends = (starts + d)[:, None]
                for lhs, rules in self.rules.items():
                    for r, rule in enumerate(rules):
                        left = table_of(rule.target[0])
                        for t, item in enumerate(rule.target[1:]):
                            out = prefixes[lhs, r][t]
                            out[starts, starts + d] = (left[starts[:, None], m] * table_of(item)[m, ends]).sum(1)
                            left = out
            for lhs in order:
                total = np.zeros(len(starts))
                for r, rule in enumerate(self.rules[lhs]):
                    last = prefixes[lhs, r][-1] if len(rule.target) > 1 else table_of(rule.target[0])
                    total += rule.p * last[starts, starts + d]
                tables[lhs][starts, starts + d] = total
        return float(tables[symbol or self.start][0, n])

    def _target_unary_order(self) -> list[str]:
        """Non-terminals ordered so that a rule whose target side is one non-terminal comes after that one's own
        rules: within a span length, ``X -> Y`` needs Y's value for the same span first."""
        after = {lhs: {r.target[0].symbol for r in rules
                       if len(r.target) == 1 and isinstance(r.target[0], Link) and r.target[0].symbol in self.rules}
                 for lhs, rules in self.rules.items()}
        order: list[str] = []

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in order:
                return
            if name in path:
                raise GrammarError(f"unary cycle on the target side through {name!r}")
            for before in sorted(after[name]):
                visit(before, path + (name,))
            order.append(name)

        for name in self.rules:
            visit(name, ())
        return order

    # ------------------------------------------------------------------------------------ internals

    def _vocabularies(self, origin: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Literal words in order of first appearance in the rules, then each class's words in class order."""
        source, target = {}, {}
        for rules in self.rules.values():
            for rule in rules:
                source.update((w, None) for w in rule.source if isinstance(w, str))
                target.update((w, None) for w in rule.target if isinstance(w, str))
        for terminal_class in self.classes.values():
            for vocab, words in ((source, terminal_class.source), (target, terminal_class.target)):
                clash = sorted(set(words) & set(vocab))
                if clash:
                    raise GrammarError(f"{origin}: words {clash[:3]} of terminal class "
                                       f"{terminal_class.name!r} are also used elsewhere; class words must be unique")
                vocab.update((w, None) for w in words)
        return tuple(source), tuple(target)

    def _min_lengths(self, origin: str) -> dict[str, int]:
        """Fewest source words each symbol can derive (a fixed point); every non-terminal must be able to finish."""
        best = {name: 1.0 for name in self.classes} | {name: float("inf") for name in self.rules}
        changed = True
        while changed:
            changed = False
            for lhs, rules in self.rules.items():
                for rule in rules:
                    n = sum(1 if isinstance(item, str) else best[item.symbol] for item in rule.source)
                    if n < best[lhs]:
                        best[lhs], changed = n, True
        unfinished = sorted(name for name, n in best.items() if n == float("inf"))
        if unfinished:
            raise GrammarError(f"{origin}: non-terminal(s) {unfinished} can never finish: every rule recurses")
        return {name: int(n) for name, n in best.items()}

    def _unary_cycle(self) -> list[str] | None:
        """A chain X -> Y -> ... -> X of rules whose source side is one linked non-terminal, if there is one."""
        edges = {lhs: {r.source[0].symbol for r in rules
                       if len(r.source) == 1 and isinstance(r.source[0], Link) and r.source[0].symbol in self.rules}
                 for lhs, rules in self.rules.items()}

        def visit(path: list[str]) -> list[str] | None:
            for nxt in sorted(edges[path[-1]]):
                if nxt in path:
                    return path[path.index(nxt):] + [nxt]
                found = visit(path + [nxt])
                if found:
                    return found
            return None

        for start in self.rules:
            found = visit([start])
            if found:
                return found
        return None

    def _compile(self) -> None:
        ids = {name: k for k, name in enumerate(list(self.rules) + list(self.classes))}
        source_ids = {w: k for k, w in enumerate(self.source_vocab)}
        target_ids = {w: k for k, w in enumerate(self.target_vocab)}
        self._start_id = ids[self.start]
        self._min_by_id = [self.min_length[name] for name in list(self.rules) + list(self.classes)]
        self._class_sizes = [len(c.source) for c in self.classes.values()]
        self._class_offsets = ([source_ids[c.source[0]] for c in self.classes.values()],
                               [target_ids[c.target[0]] for c in self.classes.values()])
        self._choices = []
        for lhs, rules in self.rules.items():
            compiled = []
            for rule in rules:
                position = {link.index: k for k, link in enumerate(rule.links)}

                def encode(items, vocab_ids, position=position):  # bound now: called within this iteration
                    return tuple(~position[x.index] if isinstance(x, Link) else vocab_ids[x] for x in items)

                growth = sum(1 if isinstance(x, str) else self.min_length[x.symbol] for x in rule.source)
                compiled.append(_Compiled(encode(rule.source, source_ids), encode(rule.target, target_ids),
                                          tuple(ids[link.symbol] for link in rule.links),
                                          growth - self.min_length[lhs]))
            cumulative = list(itertools.accumulate(rule.p for rule in rules))
            self._choices.append((cumulative, compiled))


def _parse_rule(lhs: str, entry: object, symbols: set[str], fail) -> Rule:
    if not isinstance(entry, dict) or set(entry) != _RULE_KEYS:
        raise fail(f"non-terminal {lhs!r}: each rule needs exactly the keys {sorted(_RULE_KEYS)}, got {entry!r}")
    text = entry["rule"]
    where = f"rule {lhs} -> {text!r}"
    try:
        p = float(Fraction(str(entry["p"])))
    except (ValueError, ZeroDivisionError):
        raise fail(f"{where}: probability {entry['p']!r} is not a number or fraction like 1/5") from None
    if not 0 < p <= 1:
        raise fail(f"{where}: probability {p:g} is outside (0, 1]")
    if not isinstance(text, str) or text.count("|") != 1:
        raise fail(f"{where}: expected 'source side | target side'")
    sides = []
    for side_name, side in zip(("source", "target"), text.split("|")):
        items = []
        for token in side.split():
            match = _LINK.match(token)
            if match is None:
                items.append(token)
                continue
            name, index = match.group(1), int(match.group(2))
            if name not in symbols:
                raise fail(f"{where}: undefined non-terminal {name!r} in {token!r}; "
                           f"defined: {sorted(symbols, key=repr)}")
            items.append(Link(name, index))
        if not items:
            raise fail(f"{where}: the {side_name} side is empty")
        sides.append(tuple(items))
    source_links, target_links = ([x for x in side if isinstance(x, Link)] for side in sides)
    for side_name, links in (("source", source_links), ("target", target_links)):
        indices = [link.index for link in links]
        duplicated = sorted({k for k in indices if indices.count(k) > 1})
        if duplicated:
            raise fail(f"{where}: link index {duplicated[0]} appears twice on the {side_name} side "
                       "(each linked non-terminal needs its own index)")
    if {link.index: link.symbol for link in source_links} != {link.index: link.symbol for link in target_links}:
        raise fail(f"{where}: linked non-terminals differ between the sides "
                   f"(source {[f'{x.symbol}{x.index}' for x in source_links]}, "
                   f"target {[f'{x.symbol}{x.index}' for x in target_links]})")
    return Rule(lhs, p, sides[0], sides[1], text)


def _uniforms(rng: np.random.Generator, chunk: int = 1024) -> Iterator[float]:
    """Uniform [0, 1) floats from ``rng``, drawn in blocks: one numpy call per block, not per rule choice."""
    while True:
        yield from rng.random(chunk).tolist()
