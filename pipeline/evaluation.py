"""Coarse and fine accuracy (paper §4.3), by greedy decoding, and the per-length records behind the curves.

For each sequence the model reads the source and the separator, then generates the target greedily: the most
likely symbol at each step, fed back as the next input. With ``#correct_i`` the number of symbols right before
the first error and ``|target_i|`` the target's length including ``</s>``:

    coarse = #(sequences entirely right, </s> included) / #seqs
    fine   = (1 / #seqs) * sum_i #correct_i / |target_i|

One teacher-forced pass gives the same numbers. Up to the first error, greedy decoding feeds back exactly the
reference symbols, so its inputs, and therefore its predictions, are those of the teacher-forced pass at every
position up to and including the first error; what comes after the first error counts for neither metric. So
``#correct_i`` is the length of the prefix on which the teacher-forced argmax matches the target, and generation
never has to run step by step. :func:`greedy_correct_prefix` decodes literally, one step at a time; tests check the
two agree on real model outputs.

Beside them, for the cross-check tasks of Delétang et al. 2023 (:mod:`pipeline.tasks.deletang`), their score: the
share of target tokens right at each source length, averaged over the lengths
(:func:`length_averaged_token_accuracy`), on greedy outputs that go on past an error (:func:`greedy_correct_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from pipeline.data.encoding import IGNORE_INDEX, Batch, JointVocabulary, collate
from pipeline.models.base import TransductionModel
from pipeline.tasks import Pair

FIRST_ERROR_BINS = 10  # first_errors.csv: where the first error falls, by tenth of the target
EVAL_BATCH_SIZE = 50  # fastest on one CPU thread for these models (measured: docs/training.md)


@dataclass(frozen=True)
class Scores:
    """Per-sequence results of one evaluation; the accuracies are derived from them."""

    correct_prefix: Tensor  # (N,) symbols right before the first error
    target_lengths: Tensor  # (N,) |target| + 1 (</s> included)
    source_lengths: Tensor  # (N,)

    @property
    def coarse(self) -> float:
        return coarse_accuracy(self.correct_prefix, self.target_lengths)

    @property
    def fine(self) -> float:
        return fine_accuracy(self.correct_prefix, self.target_lengths)

    def by_source_length(self) -> list[dict]:
        """Coarse and fine accuracy per source length, for generalisation-by-length curves."""
        rows = []
        for length in torch.unique(self.source_lengths).tolist():
            sel = self.source_lengths == length
            rows.append(dict(source_length=int(length), n=int(sel.sum()),
                             coarse=coarse_accuracy(self.correct_prefix[sel], self.target_lengths[sel]),
                             fine=fine_accuracy(self.correct_prefix[sel], self.target_lengths[sel])))
        return rows

    def first_errors(self, bins: int = FIRST_ERROR_BINS) -> list[dict]:
        """Where in the target the first wrong symbol falls: the sequences per tenth of the target (``where`` 0: its
        first tenth, </s> counted as its last symbol) and those without an error (``where`` "none"), with the mean
        target length of each group. What tells a model that fails at the start (the reordering of an ITG rule) from
        one that drifts late (a memory that runs out), without the checkpoint."""
        wrong = self.correct_prefix < self.target_lengths
        where = torch.div(self.correct_prefix[wrong] * bins, self.target_lengths[wrong], rounding_mode="floor")
        rows = []
        for b in range(bins):
            sel = where == b
            lengths = self.target_lengths[wrong][sel]
            rows.append(dict(where=b, n=int(sel.sum()), mean_target_length=_mean(lengths)))
        rows.append(dict(where="none", n=int((~wrong).sum()), mean_target_length=_mean(self.target_lengths[~wrong])))
        return rows


def _mean(values: Tensor) -> str:
    return f"{values.double().mean().item():.1f}" if len(values) else ""


def model_device(model: torch.nn.Module) -> torch.device:
    """Where the model's parameters live: evaluation sends its batches there (the CPU or a GPU)."""
    return next(model.parameters()).device


def coarse_accuracy(correct_prefix: Tensor, target_lengths: Tensor) -> float:
    """Share of sequences whose whole target, </s> included, is right."""
    return (correct_prefix == target_lengths).double().mean().item()


def fine_accuracy(correct_prefix: Tensor, target_lengths: Tensor) -> float:
    """Mean over sequences of (symbols right before the first error) / |target incl. </s>|."""
    return (correct_prefix.double() / target_lengths.double()).mean().item()


def correct_tokens(outputs: Sequence[int], target: Sequence[int]) -> int:
    """Delétang et al.'s per-token count: the target positions j whose output is ``target[j]``, whether or not an
    earlier one was wrong. An output that ended early (``</s>``) is wrong where it is missing; outputs past the
    target's length are not scored (theirs are as long as the target by construction)."""
    return sum(o == t for o, t in zip(outputs, target))


def length_averaged_token_accuracy(correct: Tensor, target_lengths: Tensor, source_lengths: Tensor) -> float:
    """Delétang et al. 2023's score: at each source length the share of target tokens right (their ``accuracy_fn``
    over a batch of one length), then the mean over the lengths, each length counting once however many sequences
    it has. ``correct`` (N,): :func:`correct_tokens` per sequence; ``target_lengths`` (N,): |target| without
    ``</s>`` (their targets have none). Over the lengths they score (41..500: the test and long sets of their tasks
    together) it is their score of one trained model."""
    per_length = [correct[source_lengths == k].sum() / target_lengths[source_lengths == k].sum()
                  for k in torch.unique(source_lengths)]
    return torch.stack(per_length).double().mean().item()


# The cached sets Delétang et al.'s score covers on their tasks: together their test lengths, 41-500 (docs/tasks.md)
TOKEN_ACCURACY_SPLITS = ("test", "long")


def token_accuracy(model: TransductionModel, pairs: list[Pair], vocab: JointVocabulary,
                   batch_size: int = EVAL_BATCH_SIZE) -> float:
    """Delétang et al. 2023's score of ``model`` on ``pairs`` (for one of their tasks, the pairs of
    :data:`TOKEN_ACCURACY_SPLITS` together): :func:`length_averaged_token_accuracy` of its greedy outputs
    (:func:`batched_greedy_correct_tokens`, ``batch_size`` pairs decoded side by side)."""
    return length_averaged_token_accuracy(batched_greedy_correct_tokens(model, pairs, vocab, batch_size),
                                          torch.tensor([len(p.target) for p in pairs]),
                                          torch.tensor([len(p.source) for p in pairs]))


def correct_prefix_from_logits(logits: Tensor, batch: Batch) -> Tensor:
    """#correct_i from one teacher-forced pass: the length of the longest prefix of the scored positions on which
    the argmax equals the target (equal to greedy decoding's, see the module docstring)."""
    scored = batch.targets != IGNORE_INDEX
    wrong = scored & (logits.argmax(-1) != batch.targets)
    # Scored positions are contiguous: position k+1+j holds target symbol j. The first wrong one ends the prefix.
    start = batch.source_lengths + 1
    positions = torch.arange(batch.targets.shape[1], device=logits.device).expand_as(wrong)
    first_wrong = torch.where(wrong, positions, torch.full_like(positions, torch.iinfo(positions.dtype).max))
    first_wrong = first_wrong.min(dim=1).values
    return torch.minimum(first_wrong - start, batch.target_lengths)


def length_sorted_batches(pairs: list[Pair], batch_size: int) -> list[list[int]]:
    """The indices of ``pairs`` in batches of ``batch_size``, by joint length (source + target), so that a batch's
    sequences are of similar length: less padding to score, fewer idle rows to decode."""
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i].source) + len(pairs[i].target))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


@torch.no_grad()
def evaluate(model: TransductionModel, pairs: list[Pair], vocab: JointVocabulary,
             batch_size: int = EVAL_BATCH_SIZE) -> Scores:
    """Coarse/fine scores of ``model`` on ``pairs``, in batches of similar length to cut padding."""
    was_training = model.training
    model.eval()
    device = model_device(model)
    prefix = torch.empty(len(pairs), dtype=torch.long)
    for idx in length_sorted_batches(pairs, batch_size):
        batch = collate([pairs[i] for i in idx], vocab).to(device)
        prefix[idx] = correct_prefix_from_logits(model(batch.inputs, batch.lengths), batch).cpu()
    model.train(was_training)
    return Scores(
        correct_prefix=prefix,
        target_lengths=torch.tensor([len(p.target) + 1 for p in pairs]),
        source_lengths=torch.tensor([len(p.source) for p in pairs]),
    )


@torch.no_grad()
def greedy_decode(model: TransductionModel, source: Sequence[int], vocab: JointVocabulary, max_outputs: int, *,
                  reference: Sequence[int] | None = None, on_read: Callable | None = None) -> list[int]:
    """The one greedy decoder (evaluation and ``transduce inspect`` both use it): read ``<s> source <|>`` one token
    at a time, then feed back the argmax output each step, until ``</s>``, ``max_outputs`` outputs, or (given a
    ``reference`` of output ids) the first output that differs from it: a longer output cannot have a longer correct
    prefix. ``on_read(token, state)`` is called after every token read (inspection records the memory there).
    Returns the output ids predicted. One sequence at a time: no padding, nothing shared."""
    was_training = model.training
    model.eval()
    device = model_device(model)
    state = model.initial_state(1, capacity=len(source) + 2 + max_outputs)

    def read(token: int) -> Tensor:
        nonlocal state
        logits, state = model.step(torch.tensor([token], device=device), state)
        if on_read is not None:
            on_read(token, state)
        return logits

    for token in [vocab.BOS] + [int(s) for s in vocab.source_ids(source)]:
        read(token)
    logits = read(vocab.SEP)
    outputs: list[int] = []
    for j in range(max_outputs):
        predicted = int(logits.argmax(-1))
        outputs.append(predicted)
        if predicted == vocab.eos or j == max_outputs - 1:
            break
        if reference is not None and predicted != reference[j]:
            break
        logits = read(vocab.target_offset + predicted)
    model.train(was_training)
    return outputs


def greedy_correct_prefix(model: TransductionModel, pairs: list[Pair], vocab: JointVocabulary) -> Tensor:
    """#correct_i by literal greedy decoding (:func:`greedy_decode`), up to |target| + 1 outputs."""
    result = []
    for pair in pairs:
        reference = list(pair.target) + [vocab.eos]  # target symbol j is output id j
        outputs = greedy_decode(model, pair.source, vocab, len(reference), reference=reference)
        result.append(next((j for j, (o, r) in enumerate(zip(outputs, reference)) if o != r), len(outputs)))
    return torch.tensor(result)


def greedy_correct_tokens(model: TransductionModel, pairs: list[Pair], vocab: JointVocabulary) -> Tensor:
    """:func:`correct_tokens` of each pair's greedy output (:func:`greedy_decode`): |target| outputs, fewer if the
    model ends with ``</s>``, each fed back as it came, right or wrong. Teacher forcing would feed the reference
    after an error, which Delétang et al.'s models never see: theirs predict every output position from the input
    alone (or, autoregressive, from their own outputs). One sequence at a time, as greedy decoding is."""
    return torch.tensor([correct_tokens(greedy_decode(model, pair.source, vocab, len(pair.target)), pair.target)
                         for pair in pairs])


@torch.no_grad()
def batched_greedy_correct_tokens(model: TransductionModel, pairs: list[Pair], vocab: JointVocabulary,
                                  batch_size: int = EVAL_BATCH_SIZE) -> Tensor:
    """:func:`greedy_correct_tokens` (its oracle, tested equal) with ``batch_size`` pairs decoded side by side, in
    batches of similar length. Greedy decoding must step, so one pair at a time costs a step of the model per
    position of every pair; side by side a step serves the whole batch. No padding is needed: every row reads one
    token a step, each at its own stage (its source, its separator, then its own outputs fed back), and no model
    lets one row of a batch see another. A row that has given its |target| outputs, or ``</s>``, steps on with the
    separator until the longest row of its batch is done; what it predicts then is never read.

    Each row's state is made for its own sequence: ``initial_state`` gets every row's step count (``lengths``), the
    capacity a lone decode would give it, so a randomised Transformer draws each row's positions over its own length
    (one row alone draws what :func:`greedy_decode` does)."""
    was_training = model.training
    model.eval()
    device = model_device(model)
    correct = torch.zeros(len(pairs), dtype=torch.long)
    for idx in length_sorted_batches(pairs, batch_size):
        rows = len(idx)
        sources = [[int(s) for s in vocab.source_ids(pairs[i].source)] for i in idx]
        read = torch.tensor([len(s) + 2 for s in sources])  # <s> source <|>: the tokens read before output 0
        wanted = torch.tensor([len(pairs[i].target) for i in idx])
        targets = torch.full((rows, int(wanted.max())), -1, dtype=torch.long)
        prompts = torch.full((rows, int(read.max())), vocab.SEP, dtype=torch.long)
        for r, i in enumerate(idx):
            targets[r, : wanted[r]] = torch.tensor(pairs[i].target, dtype=torch.long)
            prompts[r, : read[r]] = torch.tensor([vocab.BOS, *sources[r], vocab.SEP])
        capacity = read + wanted  # what greedy_decode gives one pair: len(source) + 2 + max_outputs
        state = model.initial_state(rows, capacity=int(capacity.max()), lengths=capacity)
        live = torch.ones(rows, dtype=torch.bool)  # rows still giving outputs
        predicted = torch.zeros(rows, dtype=torch.long)
        for step in range(int((read + wanted).max()) - 1):  # row r's last output comes at step read + wanted - 2
            output = step - (read - 1)  # the output index row r predicts at this step (negative: still reading)
            tokens = torch.where(output <= 0, prompts[:, min(step, prompts.shape[1] - 1)],
                                 vocab.target_offset + predicted)
            tokens = torch.where(live | (output <= 0), tokens, vocab.SEP)
            logits, state = model.step(tokens.to(device), state)
            predicted = logits.argmax(-1).cpu()
            scored = live & (output >= 0) & (output < wanted)
            j = output.clamp(0, targets.shape[1] - 1)
            correct[torch.tensor(idx)[scored]] += (predicted == targets[torch.arange(rows), j])[scored].long()
            live &= ~(scored & ((predicted == vocab.eos) | (output == wanted - 1)))
    model.train(was_training)
    return correct


@torch.no_grad()
def memory_usage(model: TransductionModel, pairs: list[Pair], vocab: JointVocabulary) -> dict[str, float]:
    """Mean push and pop signals on the source half (the source symbols) and the target half (separator and target
    symbols) of ``pairs``, per memory end: a cheap view of how a memory model uses its memory. A model that has
    learnt to use a stack pushes ~1 and pops ~0 while reading the source, and the reverse while writing the target.
    Empty for models without a memory."""
    if not hasattr(model, "memory_signals_over"):
        return {}
    batch = collate(pairs, vocab)
    device = model_device(model)
    d, u = model.memory_signals_over(batch.inputs.to(device), batch.lengths.to(device))
    d, u = d.cpu(), u.cpu()
    positions = torch.arange(batch.inputs.shape[1]).unsqueeze(0)
    k = batch.source_lengths.unsqueeze(1)
    halves = {"source": (positions >= 1) & (positions <= k),
              "target": (positions > k) & (positions < batch.lengths.unsqueeze(1))}
    out = {}
    for half, mask in halves.items():
        for e, end in enumerate(model.memory.signal_labels()):
            suffix = f"_{end}" if end else ""
            out[f"memory/push_{half}{suffix}"] = d[..., e][mask].mean().item()
            out[f"memory/pop_{half}{suffix}"] = u[..., e][mask].mean().item()
    return out
