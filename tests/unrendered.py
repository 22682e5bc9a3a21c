"""Figures built but not rendered, for the report tests whose property is never a figure's pixels."""

from pathlib import Path

# A valid 1x1 white PNG: what a figure saved under `figures_unrendered` holds.
PLACEHOLDER_PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                                "0000000d49444154789c63f8ffffff7f0009fb03fd2a86e38a0000000049454e44ae426082")


def unrender_figures(monkeypatch) -> None:
    """From here on, figures are built as the report builds them (axes, curves, tables) but saved as a placeholder
    PNG, unrendered and with no tight layout (see `figures_unrendered`)."""
    from matplotlib.figure import Figure

    def savefig(self, fname, *args, **kwargs):
        if hasattr(fname, "write"):
            fname.write(PLACEHOLDER_PNG)
        else:
            Path(fname).write_bytes(PLACEHOLDER_PNG)

    monkeypatch.setattr(Figure, "savefig", savefig)
    monkeypatch.setattr(Figure, "tight_layout", lambda self, *args, **kwargs: None)
