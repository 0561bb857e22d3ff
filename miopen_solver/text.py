"""Text helpers every module shares: values in messages, lines of files.

* :func:`shorten` cuts a value echoed in a message (an error names the value, and a flag
  value or a path can be megabytes);
* :func:`cut_values` applies it to every runaway value in a finished message (the one-line
  errors and warnings of the CLI);
* :func:`text_lines` splits a file's text into lines at ``"\\n"`` only (``str.splitlines``
  also breaks at U+2028, U+0085, form feed and other characters that can sit inside a
  line), after dropping a leading byte-order mark; a ``"\\r"`` before the ``"\\n"`` goes too;
* :func:`json_text` serialises every JSON the driver and the library write (stdout
  ``--json`` records, results logs, fixture files) as strict JSON: a non-finite float
  (NaN, an infinity) is ``null``, never the ``NaN``/``Infinity`` strict parsers reject;
* :func:`json_error` words a ``json.JSONDecodeError`` for a message (what and the column).
"""

from __future__ import annotations

import json
import math
import re

CUT_LIMIT = 60
"""Characters of a value a message shows before it is cut (:func:`shorten`)."""
_CUT_SLACK = 20
"""A value at most this much longer than the limit is shown whole (the ellipsis and the
length would take about as much room as they save)."""


def shorten(value, limit: int = CUT_LIMIT) -> str:
    """``str(value)`` cut to ``limit`` characters for a message, with an ellipsis and the
    full length, ``aaaa...aaa... (10000 characters)``; values up to ``limit + 20``
    characters are shown whole. The one helper every message that echoes a value uses; an
    int too long for ``str`` (past Python's 4300-digit conversion limit) is shown by its sign
    and bit length, ``an int of 16610 bits``."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 14000:
        return f"{'-' if value < 0 else ''}an int of {value.bit_length()} bits"
    text = str(value)
    return text if len(text) <= limit + _CUT_SLACK else f"{text[:limit]}... ({len(text)} characters)"


BOM = "\ufeff"


def text_lines(text: str) -> list:
    """The lines of a text file's contents: split at ``"\\n"`` only, a leading byte-order
    mark dropped, a ``"\\r"`` ending a line dropped (CRLF files); no empty last line for a
    final newline. Line ``n`` of the file is element ``n - 1``."""
    if text.startswith(BOM):
        text = text[len(BOM):]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


SHOWN_MAX = CUT_LIMIT + 40
"""The longest text :func:`shorten` returns (60 characters, ``... (N characters)``)."""
WORD_LIMIT = 4 * CUT_LIMIT
"""An unquoted word longer than this is a runaway value (:func:`cut_values`); shorter ones
(paths, problem keys, lists of names) are shown whole."""
_QUOTED = re.compile(r"(?<![\w'])'([^']{%d,})'(?![\w'])" % (SHOWN_MAX + 1))
"""A quoted value: its quotes stand alone (``''`` followed later by ``'-'`` is two short
values, not one long one between them)."""
_LONG_WORD = re.compile(r"\S{%d,}" % (WORD_LIMIT + 1))


_BYTES_REPR = re.compile(r"""(?<!\w)'?b(['"])(.*?)\1'?""")


def without_bytes_reprs(message: str) -> str:
    """``message`` with Python ``bytes`` reprs shown as the text they hold: vendor bindings
    (hip-python) format C strings as ``b'...'``, sometimes inside quotes of their own
    (``failed to dlopen 'b'libamdhip64.so''`` -> ``failed to dlopen 'libamdhip64.so'``)."""
    def plain(m):
        quoted = m.group(0).startswith("'") and m.group(0).endswith("'") and len(m.group(0)) > 3 + len(m.group(2))
        return f"'{m.group(2)}'" if quoted else m.group(2)
    return _BYTES_REPR.sub(plain, message)


def cut_values(message: str) -> str:
    """``message`` with every runaway value cut by :func:`shorten`: a quoted value
    (``'...'``, as ``repr`` shows one) longer than :data:`SHOWN_MAX` characters and any
    other word longer than :data:`WORD_LIMIT`. A value :func:`shorten` already cut is left
    as it is. The last line of defence of every one-line error and warning, for values a
    message got from code that did not cut them itself (a click option, a library error)."""
    def cut_word(m):
        word = m.group(0)
        value = word.rstrip(":;,")                   # keep the message's own punctuation
        return shorten(value) + word[len(value):]

    return _LONG_WORD.sub(cut_word, _QUOTED.sub(lambda m: f"'{shorten(m.group(1))}'", message))


def json_safe(value):
    """``value`` with every non-finite float (NaN, an infinity) in it, at any depth of
    dicts, lists and tuples, replaced by None; anything else is returned as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def json_text(value, **kwargs) -> str:
    """``json.dumps(value, **kwargs)`` as strict JSON: :func:`json_safe` first (a non-finite
    float is ``null``), then ``allow_nan=False``, so a value that still slips through raises
    ``ValueError`` rather than writing ``NaN``. Every JSON the driver and the library write
    goes through it."""
    return json.dumps(json_safe(value), allow_nan=False, **kwargs)


def json_error(e: json.JSONDecodeError) -> str:
    """A decode error for a message, ``<what> at column <n>``: ``json``'s own ``msg`` ends
    in ``at`` for some errors (``Unterminated string starting at``), not doubled here."""
    what = e.msg[:-len(" at")] if e.msg.endswith(" at") else e.msg
    return f"{what} at column {e.colno}"
