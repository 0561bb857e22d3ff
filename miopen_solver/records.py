"""Reading records: the plain data (dicts, lists, text, numbers, booleans, None) that carries a
target or a decided solution to a worker process (:meth:`~miopen_solver.target.Target.to_record`,
:meth:`~miopen_solver.solver.Solution.to_record`), checked field by field before anything is
built from it. Every check raises :class:`~miopen_solver.errors.RecordError` naming the
record, the field's path, the value and what is allowed.
"""

from __future__ import annotations

import math

from .errors import ArgumentError, RecordError


def fields_of(rec, names, record: str, path: str = "", what: str = "") -> dict:
    """``rec`` when it is a dict whose keys are exactly ``names``.

    Raises:
        RecordError: not a dict, a missing field or an unknown one (``what`` describes the
            record in the message: ``a Target.to_record() dict``).
    """
    allowed = what or f"a dict with the fields {', '.join(names)}"
    if not isinstance(rec, dict):
        raise RecordError(record, path, rec, allowed)
    for name in names:
        if name not in rec:
            raise RecordError(record, _join(path, name), ArgumentError.MISSING, allowed)
    for name in rec:
        if name not in names:
            raise RecordError(record, _join(path, str(name)), rec[name], allowed, "unknown field")
    return rec


def check_int(value, record: str, field: str, lo: int | None = None, allowed: str = "") -> int:
    """``value`` when it is an int (not a bool) and at least ``lo`` (when given).

    Raises:
        RecordError: another type, or below ``lo``.
    """
    allowed = allowed or ("an int" if lo is None else f"an int >= {lo}")
    if isinstance(value, bool) or not isinstance(value, int) or (lo is not None and value < lo):
        raise RecordError(record, field, value, allowed)
    return value


def check_bool(value, record: str, field: str) -> bool:
    """``value`` when it is a bool.

    Raises:
        RecordError: another type (``1`` and ``"true"`` included).
    """
    if not isinstance(value, bool):
        raise RecordError(record, field, value, "true or false")
    return value


def check_str(value, record: str, field: str, choices=None, allowed: str = "") -> str:
    """``value`` when it is a non-empty string (one of ``choices`` when given).

    Raises:
        RecordError: another type, an empty string or one outside ``choices``.
    """
    allowed = allowed or (", ".join(map(repr, choices)) if choices else "a non-empty string")
    if not isinstance(value, str) or not value or (choices is not None and value not in choices):
        raise RecordError(record, field, value, allowed)
    return value


def check_optional(value, record: str, field: str, kind: str):
    """``value`` when it is None, or of ``kind``: ``"text"`` (a string) or ``"ms"`` (a finite
    number >= 0, int or float, not a bool).

    Raises:
        RecordError: anything else.
    """
    if value is None:
        return None
    if kind == "text":
        if not isinstance(value, str):
            raise RecordError(record, field, value, "a string or null")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 0):
        raise RecordError(record, field, value, "a finite number >= 0 or null")
    return float(value)


def check_list(value, record: str, field: str, length: int | None = None, allowed: str = "") -> list:
    """``value`` as a list when it is a list or tuple (of ``length`` items, when given).

    Raises:
        RecordError: another type or another length.
    """
    allowed = allowed or ("a list" if length is None else f"a list of {length} items")
    if not isinstance(value, (list, tuple)) or (length is not None and len(value) != length):
        raise RecordError(record, field, value, allowed)
    return list(value)


NO_FIELD = object()
""":func:`first_difference`'s want part for a field ``got`` has and ``want`` has not."""


def first_difference(got, want, path: str = ""):
    """Where plain data ``got`` differs from ``want``: ``(path, got part, want part)`` of the
    first difference (dict keys in ``want``'s order), or None when they are the same. Types
    count: ``True`` is not ``1``, ``1.0`` not ``1``; a tuple is the list it would be in JSON.
    A field ``got`` lacks is ``ArgumentError.MISSING`` there; one only ``got`` has is
    :data:`NO_FIELD` in want's place."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return path, got, want
        for k, v in want.items():
            if k not in got:
                return _join(path, str(k)), ArgumentError.MISSING, v
            diff = first_difference(got[k], v, _join(path, str(k)))
            if diff:
                return diff
        extra = [k for k in got if k not in want]
        return (_join(path, str(extra[0])), got[extra[0]], NO_FIELD) if extra else None
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return path, got, want
        for i, (g, w) in enumerate(zip(got, want)):
            diff = first_difference(g, w, f"{path}[{i}]")
            if diff:
                return diff
        return None
    if type(got) is not type(want) or got != want:
        return path, got, want
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


__all__ = ["NO_FIELD", "check_bool", "check_int", "check_list", "check_optional", "check_str", "fields_of",
           "first_difference"]
