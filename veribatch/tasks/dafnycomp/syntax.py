"""Just enough of Dafny's syntax to find declarations, their contracts and their bodies.

DafnyComp's task (§3.3) is defined on the text around each method's opening brace: the
contract clauses (``requires``, ``ensures``, ``reads``, ``modifies``, ``decreases``)
between a declaration's signature and its body are removed and must be regenerated; the
body (loop invariants and asserts included) stays.  Stripping and the integrity check both
need to know exactly where those clauses and bodies are, so both use this one scanner
rather than line-based regexes (ReForm's own scripts drop lines by their first word, which
also drops loop invariants and mangles one-line headers).

What it understands: comments (``//``, nested ``/* */``), strings (also verbatim
``@"..."``), char literals versus primed identifiers (``x'``), attributes (``{:...}``),
declarations of ``method``, ``function``, ``predicate``, ``lemma`` and ``constructor``
(with modifiers such as ``ghost``/``static``/``twostate``, Dafny 3's ``function method``,
and ``by method`` bodies), at any nesting depth (inside classes, datatypes, modules).
What it does not do: type-check or parse expressions.  The one judgement call is a ``{``
after a contract clause: it opens the body when the clause so far ends an expression
(``ensures x > 0 {``), and a set display otherwise (``modifies {}``, ``ensures s == {}``
is an operator followed by ``{``).  A program this scanner cannot make sense of (an
unbalanced brace, an unterminated comment or string) raises `DafnySyntaxError` naming the
line: the integrity check then records the program as unchecked, never as honest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CONTRACT_KEYWORDS = ("requires", "ensures", "reads", "modifies", "decreases")
DECLARATION_KEYWORDS = ("method", "function", "predicate", "lemma", "constructor")
MODIFIERS = ("ghost", "static", "twostate", "least", "greatest", "inductive", "copredicate",
             "opaque", "abstract", "nameonly")
# Tokens that end a bodyless declaration's contract (the next member or the enclosing `}`).
_MEMBER_START = frozenset((*DECLARATION_KEYWORDS, *MODIFIERS, "class", "datatype", "codatatype",
                           "trait", "module", "import", "include", "const", "type", "newtype",
                           "iterator"))
# Identifiers after which an expression is not complete: a `{` there is a set display.
_EXPECTS_OPERAND = frozenset((*CONTRACT_KEYWORDS, "in", "then", "else", "multiset", "iset",
                              "if", "case", "return", "old", "fresh", "allocated", "unchanged",
                              "assert", "assume", "expect", "var", "forall", "exists", "not"))


class DafnySyntaxError(ValueError):
    """The scanner could not make sense of the program; the message names line and column."""


@dataclass(frozen=True)
class Token:
    kind: str   # ident | number | string | char | punct | attr | comment
    text: str
    start: int  # offsets into the program text
    end: int


@dataclass(frozen=True)
class Clause:
    keyword: str   # one of CONTRACT_KEYWORDS
    start: int     # offset of the keyword
    end: int       # offset just after the clause's last (non-comment) token
    text: str


@dataclass(frozen=True)
class Declaration:
    kind: str                       # method | function | predicate | lemma | constructor
    name: str
    start: int                      # first modifier (or the keyword)
    signature_end: int              # just after the signature's last token
    signature: str                  # its tokens joined by single spaces (comments dropped)
    clauses: tuple[Clause, ...]
    body: tuple[int, int] | None    # [start, end) of the body braces (+ a `by method` body)
    attributes: tuple[str, ...]     # attributes on the header, e.g. ("{:axiom}",)

    @property
    def bodyless(self) -> bool:
        return self.body is None


def _line_col(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1)
    return f"line {line}, column {col}"


_TOKEN = re.compile(r"""
     (?P<ws>\s+)
    |(?P<line>//[^\n]*)
    |(?P<block>/\*)
    |(?P<string>@"(?:[^"]|"")*"|"(?:[^"\\\n]|\\.)*")
    |(?P<ident>[^\W\d][\w'?]*)
    |(?P<number>\d(?:\w|\.(?=\d))*)
    |(?P<attr>\{:)
    |(?P<char>'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^'\\\n])')
    |(?P<punct>.)
""", re.VERBOSE | re.DOTALL)


def tokenize(text: str, *, comments: bool = True) -> list[Token]:
    """Dafny tokens with offsets.  Punctuation is one character per token except the
    attribute opener, which is folded with the whole attribute into one ``attr`` token.
    A prime after an identifier character belongs to the identifier (``x'``), so a quote
    that starts a token opens a char literal."""
    out: list[Token] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        assert m is not None  # `punct` matches any character
        kind, end = m.lastgroup, m.end()
        if kind == "ws":
            pos = end
            continue
        if kind == "block":
            end = _comment_end(text, pos)
            kind = "comment"
        elif kind == "line":
            kind = "comment"
        elif kind == "attr":
            end = _attribute_end(text, pos)
        elif kind == "punct" and m.group() in ('"', "@") and text.startswith(('"', '@"'), pos):
            raise DafnySyntaxError(f"unterminated string starting at {_line_col(text, pos)}")
        if kind != "comment" or comments:
            out.append(Token(str(kind), text[pos:end], pos, end))
        pos = end
    return out


def _comment_end(text: str, start: int) -> int:
    depth, i = 1, start + 2
    while depth:
        a, b = text.find("/*", i), text.find("*/", i)
        if b < 0:
            raise DafnySyntaxError(f"unterminated comment starting at {_line_col(text, start)}")
        if 0 <= a < b:
            depth, i = depth + 1, a + 2
        else:
            depth, i = depth - 1, b + 2
    return i


def _string_end(text: str, i: int) -> int:
    start = i
    if text[i] == "@":  # verbatim string: "" is a quote, no escapes, may span lines
        i += 2
        while i < len(text):
            if text[i] == '"':
                if text.startswith('""', i):
                    i += 2
                    continue
                return i + 1
            i += 1
    else:
        i += 1
        while i < len(text) and text[i] != "\n":
            if text[i] == "\\":
                i += 2
                continue
            if text[i] == '"':
                return i + 1
            i += 1
    raise DafnySyntaxError(f"unterminated string starting at {_line_col(text, start)}")


def _attribute_end(text: str, i: int) -> int:
    """End of the attribute ``{:...}`` starting at `i` (braces, strings and comments inside)."""
    start, depth, i = i, 0, i
    while i < len(text):
        c = text[i]
        if c == '"' or text.startswith('@"', i):
            i = _string_end(text, i)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise DafnySyntaxError(f"unterminated attribute starting at {_line_col(text, start)}")


def _matching(tokens: list[Token], i: int, text: str) -> int:
    """Index of the token closing the bracket at `i` (same kind of bracket; others nest inside)."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    stack = [pairs[tokens[i].text]]
    for j in range(i + 1, len(tokens)):
        t = tokens[j]
        if t.kind != "punct":
            continue
        if t.text in pairs:
            stack.append(pairs[t.text])
        elif t.text in ")]}":
            if t.text != stack[-1]:
                raise DafnySyntaxError(f"unbalanced {t.text!r} at {_line_col(text, t.start)}")
            stack.pop()
            if not stack:
                return j
    raise DafnySyntaxError(f"{tokens[i].text!r} at {_line_col(text, tokens[i].start)} is never closed")


def _first_on_line(text: str, t: Token) -> bool:
    """A `{` that starts its line opens a body (a set display never starts a line in practice)."""
    return not text[text.rfind("\n", 0, t.start) + 1:t.start].strip()


def _ends_operand(code: list[Token], i: int, bars: int) -> bool:
    """Whether the clause's tokens up to `i` form a complete expression (so `{` is the body)."""
    t = code[i]
    if t.text == "*" and i > 0 and code[i - 1].text == "decreases":
        return True  # `decreases *` (a method that may not terminate)
    if t.text == "|":
        return bars % 2 == 0  # the closing bar of `|s|`
    if t.kind in ("number", "string", "char"):
        return True
    if t.kind == "ident":
        return t.text not in _EXPECTS_OPERAND
    return t.kind == "punct" and t.text in ")]}"


def declarations(text: str, tokens: list[Token] | None = None) -> list[Declaration]:
    """Every method/function/predicate/lemma/constructor of `text`, in source order
    (`tokens`: `tokenize(text)` when the caller already has it)."""
    toks = tokens if tokens is not None else tokenize(text)
    code = [t for t in toks if t.kind != "comment"]  # comments never change the structure
    out: list[Declaration] = []
    i = 0
    while i < len(code):
        t = code[i]
        prev = code[i - 1] if i else None
        if t.kind == "ident" and t.text in DECLARATION_KEYWORDS and not (
            prev is not None and (prev.text in ("by", ".") or (prev.text in ("function", "predicate")
                                                              and t.text == "method"))
        ):
            decl, i = _declaration(code, i, text)
            out.append(decl)
            continue
        i += 1
    return out


def _declaration(code: list[Token], k: int, text: str) -> tuple[Declaration, int]:
    kind = code[k].text
    first = k
    while first > 0 and code[first - 1].kind == "ident" and code[first - 1].text in MODIFIERS:
        first -= 1
    i = k + 1
    if i < len(code) and code[i].text == "method" and kind in ("function", "predicate"):
        i += 1  # Dafny 3: `function method`
    attributes: list[str] = []
    while i < len(code) and code[i].kind == "attr":
        attributes.append(code[i].text)
        i += 1
    name = code[i].text if i < len(code) and code[i].kind == "ident" else ""
    # Signature: up to the first contract keyword or body brace outside brackets.
    sig_last = i - 1
    while i < len(code):
        t = code[i]
        if t.kind == "punct" and t.text in "([":
            i = _matching(code, i, text)
            sig_last, i = i, i + 1
            continue
        if _clause_start(code, i) or (t.kind == "punct" and t.text == "{") or _member_end(code, i):
            break
        sig_last, i = i, i + 1
    clauses: list[Clause] = []
    while i < len(code) and _clause_start(code, i):
        j, pending_match, bars = i + 1, False, 0
        last = i
        while j < len(code):
            t = code[j]
            if _clause_start(code, j) or _member_end(code, j):
                break
            if t.kind == "punct" and t.text in "([":
                j = _matching(code, j, text)
                last, j = j, j + 1
                continue
            if t.kind == "punct" and t.text == "{":
                if pending_match or not (_first_on_line(text, t) or _ends_operand(code, j - 1, bars)):
                    pending_match = False
                    j = _matching(code, j, text)
                    last, j = j, j + 1
                    continue
                break  # the body
            if t.kind == "ident" and t.text == "match":
                pending_match = True
            if t.text == "|" and code[j - 1].text != "|" and (j + 1 == len(code) or code[j + 1].text != "|"):
                bars += 1  # `|s|` (cardinality) or `set x | P`, not `||`
            last, j = j, j + 1
        clauses.append(Clause(code[i].text, code[i].start, code[last].end,
                              text[code[i].start:code[last].end]))
        i = j
    body: tuple[int, int] | None = None
    if i < len(code) and code[i].kind == "punct" and code[i].text == "{":
        close = _matching(code, i, text)
        start, end = code[i].start, code[close].end
        i = close + 1
        if i + 2 < len(code) and code[i].text == "by" and code[i + 1].text == "method" \
                and code[i + 2].text == "{":
            close = _matching(code, i + 2, text)
            end, i = code[close].end, close + 1
        body = (start, end)
    signature = " ".join(t.text for t in code[first:sig_last + 1])
    return Declaration(kind, name, code[first].start, code[sig_last].end, signature,
                       tuple(clauses), body, tuple(attributes)), i


def _clause_start(code: list[Token], i: int) -> bool:
    t = code[i]
    return (t.kind == "ident" and t.text in CONTRACT_KEYWORDS
            and not (i > 0 and code[i - 1].text == "."))  # `f.requires(x)` is an expression


def _member_end(code: list[Token], i: int) -> bool:
    """A bodyless declaration ends at the next member or at the enclosing scope's `}`."""
    t = code[i]
    if t.kind == "punct":
        return t.text == "}"
    return t.kind == "ident" and t.text in _MEMBER_START and not (i > 0 and code[i - 1].text == ".")
