"""The shared C front end: SV-COMP quirks, loop numbering, scopes, errors naming file and line."""

from __future__ import annotations

import pytest

from veribatch.verifiers import cfront

SVCOMP = """/* a comment with while (1) inside */
#include <assert.h>
#include <stdbool.h>
#define LIMIT 10
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *) __attribute__((__nothrow__, __leaf__)) __attribute__((__noreturn__));
void reach_error() { __assert_fail("0", "x.c", 3, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
int g;
int helper(int p) {
  int acc = 0;
  for (int k = 0; k < p; k++) { acc += k; }   // loop 1 (line 12)
  return acc;
}
int main() {
  int i = 0; bool flag = true;
  while (i < LIMIT) {                         // loop 2 (line 17)
    int inner = i;
    do { inner--; } while (inner > 0);       // loop 3 (line 19)
    i++;
  }
  for (i = 0; i < INT_MAX && flag; i++) { ERROR: break; }   // loop 4 (line 22)
  return helper(i);
}
"""


def test_parse_svcomp_quirks_and_number_loops_in_source_order():
    ast = cfront.parse(SVCOMP, filename="quirks.c")
    sites = cfront.loop_sites(ast)
    assert [(s.label, s.kind, s.line, s.function) for s in sites] == [
        (1, "for", 12, "helper"),
        (2, "while", 17, "main"),
        (3, "do", 19, "main"),
        (4, "for", 22, "main"),
    ]


def test_loops_on_one_line_are_ordered_by_column():
    ast = cfront.parse("int main() { int i = 0; while (i < 2) i++; for (;;) break; return 0; }")
    assert [s.kind for s in cfront.loop_sites(ast)] == ["while", "for"]


def test_variables_in_scope_at_loop_heads():
    ast = cfront.parse(SVCOMP, filename="quirks.c")
    sites = {s.label: s for s in cfront.loop_sites(ast)}
    assert cfront.variables_in_scope(ast, sites[1]) == {"g": "int", "p": "int", "acc": "int", "k": "int"}
    assert cfront.variables_in_scope(ast, sites[2]) == {"g": "int", "i": "int", "flag": "_Bool"}
    assert cfront.variables_in_scope(ast, sites[3]) == {
        "g": "int", "i": "int", "flag": "_Bool", "inner": "int"
    }


def test_variables_in_scope_types_and_shadowing():
    ast = cfront.parse(
        "unsigned long long big; int x;\n"
        "int main() { short x = 1; unsigned char c; long long z;\n"
        "  { int hidden = 0; }\n"
        "  while (x) { x--; }\n"
        "  return 0; }"
    )
    site = cfront.loop_sites(ast)[0]
    assert cfront.variables_in_scope(ast, site) == {
        "big": "unsigned long long", "x": "short", "c": "unsigned char", "z": "long long"
    }


def test_parse_error_names_file_and_line():
    with pytest.raises(cfront.CParseError) as err:
        cfront.parse("int main() {\n  int x = ;\n  return 0;\n}\n", filename="broken.c")
    assert "broken.c" in str(err.value) and "line 2" in str(err.value)


def test_unterminated_comment_without_code_after_it_is_a_parse_error_naming_the_file():
    with pytest.raises(cfront.CParseError, match="bad.c"):
        cfront.parse("int main() { return 0; }\n/* never closed\n   only prose\n", filename="bad.c")


def test_a_lost_comment_end_is_closed_before_the_first_line_of_code():
    text = ('/* header\n   - int overflow is fine here\n   "/*" in prose\n'
            'extern int __VERIFIER_nondet_int(void);\nint main() { char *s = "/*"; return 0; }\n')
    fixed, note = cfront.close_lost_comment(text)
    assert note == "comment opened at line 1 never closed: closed at the end of line 3"
    assert fixed.splitlines()[2].endswith(" */") and fixed.splitlines()[3:] == text.splitlines()[3:]
    ast = cfront.parse(text)
    assert cfront.function_defs(ast).keys() == {"main"}
    # closed comments and "/*" inside strings or line comments are never touched
    ok = '/* a */ int x; // /* b\nchar *s = "/*";\n'
    assert cfront.close_lost_comment(ok) == (ok, None)


def test_to_source_round_trips_and_leaves_out_the_prelude():
    ast = cfront.parse(SVCOMP)
    text = cfront.to_source(ast)
    assert "typedef" not in text and "INVARIANT" not in text
    again = cfront.parse(text)
    assert len(cfront.loop_sites(again)) == 4


def test_parse_expression_accepts_expressions_only():
    node = cfront.parse_expression("x > 0 && y % 2 == 1")
    assert cfront.to_source(node) == "(x > 0) && ((y % 2) == 1)"
    with pytest.raises(cfront.CParseError):
        cfront.parse_expression("x = 1; y = 2")


def test_python_fallback_preprocessor_matches_cpp(monkeypatch):
    with_cpp = cfront.to_source(cfront.parse(SVCOMP))
    monkeypatch.setattr(cfront.shutil, "which", lambda name: None)
    without = cfront.to_source(cfront.parse(SVCOMP))
    assert with_cpp == without


def test_parses_the_invbench_easy_programs(invbench_easy):
    files = sorted(invbench_easy.glob("*.c"))
    assert len(files) == 113
    failures = []
    loops = 0
    for f in files:
        try:
            ast = cfront.parse(f.read_text(), filename=f.name)
        except cfront.CParseError as exc:
            failures.append(str(exc))
            continue
        for site in cfront.loop_sites(ast):
            loops += 1
            assert cfront.variables_in_scope(ast, site)
    # Two upstream files lost their header comment's end (closed by close_lost_comment).
    assert failures == []
    assert loops > 113
