"""The checked JSON of every input (depth, NUL, surrogates, numbers): :mod:`simulator.base.json_input`, by the
name the web layers import it from."""

from simulator.base.json_input import (
    MAX_JSON_DEPTH,
    MAX_JSON_VALUES,
    JsonInputError,
    check_json,
    count_values,
    finite_number,
    loads_checked,
)

__all__ = ["JsonInputError", "MAX_JSON_DEPTH", "MAX_JSON_VALUES", "check_json", "count_values", "finite_number", "loads_checked", "object_id"]


def object_id(ref) -> int | None:
    """``ref`` as a database id when it is one (a whole number, or text of ASCII digits, in PostgreSQL's bigint
    range), else None: a profile or calibration named by id in a body. ``"9" * 5000`` was a 500 (Python reads at
    most 4,300 digits) and ``2**63`` one too (bigint out of range); ``"²"`` passes ``str.isdigit`` and not ``int``."""
    if isinstance(ref, bool):
        return None
    if isinstance(ref, str):
        ref = ref.strip()
        if not (ref.isascii() and ref.isdigit() and len(ref) <= 19):
            return None
        ref = int(ref)
    return ref if isinstance(ref, int) and 0 <= ref < 2**63 else None
