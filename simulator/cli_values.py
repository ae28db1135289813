"""Values the command line parses the same way in several commands (``simulator.cli`` and the commands
that must not import it, such as ``simulator.disaggregated_cli``)."""

from __future__ import annotations


def whole_numbers(text: str, option: str, error: type[Exception]) -> list[int]:
    """``N`` or ``N1,N2,...`` as distinct whole numbers; ``error`` (naming ``option``) otherwise."""
    out: list[int] = []
    for part in text.split(","):
        try:
            v = int(part.strip())
        except ValueError:
            raise error(f"{option} {text!r}: expected N or N1,N2,... (whole numbers)") from None
        if v in out:
            raise error(f"{option} {text!r}: {v} given twice")
        out.append(v)
    return out


__all__ = ["whole_numbers"]
