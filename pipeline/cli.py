"""The `transduce` command line: a thin layer over library functions that the tests call directly."""

from __future__ import annotations

import typer

from pipeline import __version__

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Reproduce 'Learning to Transduce with Unbounded Memory' (Grefenstette et al., 2015).",
)


@app.callback()
def main() -> None:
    """Reproduce 'Learning to Transduce with Unbounded Memory' (Grefenstette et al., 2015)."""


@app.command()
def version() -> None:
    """Print the pipeline's version."""
    typer.echo(__version__)


if __name__ == "__main__":  # pragma: no cover
    app()
