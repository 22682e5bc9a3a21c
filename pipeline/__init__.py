"""Reference pipeline for "Learning to Transduce with Unbounded Memory" (Grefenstette et al., NIPS 2015).

Concepts live in their own modules: ``memory`` (the differentiable Stack, Queue and DeQue), ``tasks`` (the five
transduction tasks), ``models``, ``training``, ``evaluation``, ``sweep``, ``reports`` and the ``cli``.
"""

__version__ = "0.1.0"
