"""Text helpers (miopen_solver.text): files split at "\\n" only after a byte-order mark,
and values in messages are cut by one helper, also as the last step of every CLI error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver.text import CUT_LIMIT, SHOWN_MAX, WORD_LIMIT, cut_values, shorten, text_lines

# ------------------------------------------------------------------ lines of files
BREAKERS = ["\u2028", "\u2029", "\u0085", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\r"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", " ", "#", "é"] + BREAKERS), max_size=8).map("".join), max_size=6),
       st.booleans(), st.booleans(), st.booleans())
def test_text_lines_break_at_newline_only(lines, bom, crlf, final_newline):
    # Lines hold any character but "\n" (and a "\r" of their own only where it cannot be
    # taken for CRLF: not last). Joined with "\n" (or "\r\n"), after an optional BOM.
    lines = [ln.rstrip("\r") for ln in lines]
    text = ("\ufeff" if bom else "") + ("\r\n" if crlf else "\n").join(lines)
    if final_newline and lines:
        text += "\r\n" if crlf else "\n"
    want = lines if (lines and (final_newline or lines[-1] != "")) else lines[:-1] if lines else []
    assert text_lines(text) == want


def test_text_lines_examples():
    assert text_lines("\ufeffconv -F 2\nx\u2028y\n") == ["conv -F 2", "x\u2028y"]
    assert text_lines("a\r\nb\rc\n\n") == ["a", "b\rc", ""]
    assert text_lines("") == [] and text_lines("\ufeff") == [] and text_lines("\n") == [""]


# ------------------------------------------------------------------ values in messages
def test_shorten():
    assert shorten("x" * (CUT_LIMIT + 20)) == "x" * (CUT_LIMIT + 20)          # short enough: whole
    assert shorten("x" * 10_000) == "x" * CUT_LIMIT + "... (10000 characters)"
    assert shorten(12345) == "12345"
    assert len(shorten("y" * 10**6)) <= SHOWN_MAX


def test_cut_values_cuts_runaway_values_only():
    long = "z" * 10_000
    msg = cut_values(f"--perf-config '{long}': perf config '{long} a b' has 1 fields; allowed: a,b")
    assert long not in msg and msg.count("... (10000 characters)'") == 1 and "(10004 characters)" in msg
    assert msg.endswith("; allowed: a,b")
    path = "/tmp/" + "p" * 100 + "/out.csv"                                  # shown whole
    assert cut_values(f"--csv {path}: not writable") == f"--csv {path}: not writable"
    word = "w" * (WORD_LIMIT + 1)
    assert cut_values(f"FILE {word}: cannot read") == f"FILE {shorten(word)}: cannot read"
    once = f"-n '{shorten(long)}': out of range"
    assert cut_values(once) == once                                          # never cut twice


# ------------------------------------------------------------------ every reader of text files
def test_perfdb_text_lines_are_newline_lines():
    from miopen_solver.perfdb import parse_text
    recs = parse_text("\ufeffk1=S:1,2\r\nk2=S:3\n", "gfx942")
    assert [(n, r.problem_key, r.values) for n, r in recs] == [(1, "k1", "1,2"), (2, "k2", "3")]
    # U+2028 inside line 1 does not make a new record: it is a character of line 1's field
    with pytest.raises(ValueError, match=r"^line 1: "):
        parse_text("k1=S:1\u2028k2=S:2\nk3=S:3\n", "gfx942")


def test_fixture_files_read_after_a_bom_and_by_newline(tmp_path):
    from miopen_solver import fixtures as fx
    first, second = fx.load_file("fixtures/issues.jsonl")[:2]
    path = tmp_path / "two.jsonl"
    path.write_text("\ufeff" + fx.dumps(first.record()) + "\n" + fx.dumps(second.record()) + "\n",
                    encoding="utf-8")
    assert [f.id for f in fx.load_file(path)] == [first.id, second.id]
    rec = {**first.record(), "source": "a\u2028b\x85c"}          # raw inside a JSON string
    path.write_text(fx.dumps(rec) + "\n", encoding="utf-8")
    assert [f.source for f in fx.load_file(path)] == ["a\u2028b\x85c"]


def test_cut_values_sees_two_short_quoted_values_not_one_long_one():
    """``''`` and, later, ``'-'`` in one message are two values; the text between their
    quotes is the message, never cut (a merged-branch regression: the allowed list of an
    empty --csv was cut in half)."""
    from miopen_solver.text import cut_values
    m = ("--csv '': empty (no file named); allowed: a file path in an existing, writable directory, "
         "'/dev/stdout' or a character device, or '-' for stdout")
    assert cut_values(m) == m
    long = "x" * 500
    assert cut_values(f"--perf-config '{long}': bad") == f"--perf-config '{'x' * 60}... (500 characters)': bad"


@pytest.mark.parametrize("raw,want", [
    ("failed to dlopen 'b'libamdhip64.so'': b'libamdhip64.so: cannot open shared object file'",
     "failed to dlopen 'libamdhip64.so': libamdhip64.so: cannot open shared object file"),
    ('x b"y" z', "x y z"), ("bob's thing's", "bob's thing's"), ("plain 'quoted'", "plain 'quoted'"),
])
def test_bytes_reprs_read_as_text(raw, want):
    from miopen_solver.text import without_bytes_reprs
    assert without_bytes_reprs(raw) == want
