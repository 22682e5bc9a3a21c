"""``python -m pipeline.cli``: the `transduce` command."""

from pipeline.cli import app

app()
