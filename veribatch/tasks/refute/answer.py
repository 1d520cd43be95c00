"""Model answers → programs: the input generator, the brute force, the agent's actions.

Answers to the authors' templates are the harness's XML actions (``<action><name>print_fail_case
</name><code>...</code><lang>Python 3</lang></action>``; RandSearch: ``solve_brute`` and
``generate_tc``), read as the harness's ``xml_parser`` reads them (``<thoughts>`` dropped,
the code taken verbatim, the language from ``<lang>``).  Anything else — our templates'
fenced blocks, or a model that ignored the XML format — comes out through the shared
`tasks.extract.extract_code`, so every way an answer can be unusable has the same names as
in the other tasks (``no_block``, ``truncated``, ``empty``...); an XML action cut off by
the token limit is ``truncated`` too.  REFUTE adds: which language a block is (its fence, else a sniff), which of
two blocks is the brute force and which the generator (RandSearch: the ``Brute force:`` /
``Generator:`` lines the prompt asks for, else the order), and the agent's action line.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from veribatch.tasks.extract import CodeBlock, code_blocks, extract_code

LANGS = {"python": "python", "py": "python", "python3": "python", "py3": "python",
         "cpp": "cpp", "c++": "cpp", "cc": "cpp", "cxx": "cpp"}
_ACTION = re.compile(r"ACTION\s*:\s*(EXECUTE|SUBMIT)\b", re.IGNORECASE)
PARSER_VERSION = "refute-answer-2"
_THOUGHTS = ("<thoughts>", "</thoughts>")
"""The harness's R1 client wrapped the reasoning in ``<thoughts>``; open-weight reasoning
models write ``<think>``: an action drafted while thinking (or a thought cut off by the
token limit) is never the answer."""
_LANG_TAIL = re.compile(r"\s*<lang>\s*(?P<lang>[^<]*)</lang>")
MAX_ANSWER_CHARS = 1_000_000  # far beyond any token limit; past it the answer is not read

@dataclass(frozen=True)
class Code:
    outcome: str          # tasks.extract outcome, or "ok"/"ambiguous"/"missing" for RandSearch roles
    lang: str | None      # "cpp" | "python"
    code: str | None

    @property
    def usable(self) -> bool:
        return self.outcome in ("ok", "multiple_blocks", "by_order") and bool(self.code)


def block_lang(language: str, code: str) -> str:
    if language in LANGS:
        return LANGS[language]
    return "cpp" if re.search(r"#include|\bint\s+main\s*\(", code) else "python"


def _xml_lang(lang: str | None, code: str) -> str:
    from veribatch.tasks.refute.data import parse_lang

    by_name = parse_lang(lang or "")
    return by_name or block_lang("", code)



def drop_thoughts(text: str) -> str:
    """`text` without reasoning: from a ``<thoughts>`` to the *last* ``</thoughts>`` after
    it, and each ``<think>`` to its ``</think>`` (or to the end); one pass, linear."""
    out: list[str] = []
    pos = 0
    last_close = text.rfind(_THOUGHTS[1])
    t = k = -2  # next occurrences at or after pos (-1: none), found again only once passed
    while True:
        if t != -1 and t < pos:
            t = text.find(_THOUGHTS[0], pos)
        if k != -1 and k < pos:
            k = text.find("<think>", pos)
        if t >= 0 and last_close > t and (k < 0 or t < k):
            out.append(text[pos:t])
            pos = last_close + len(_THOUGHTS[1])
            continue
        if t >= 0 and (k < 0 or t < k):  # an unclosed <thoughts> is kept, as the harness does
            out.append(text[pos:t + 1])
            pos = t + 1
            continue
        if k < 0:
            break
        out.append(text[pos:k])
        end = text.find("</think>", k + len("<think>"))
        pos = len(text) if end < 0 else end + len("</think>")
    out.append(text[pos:])
    return "".join(out)


def _between(body: str, pos: int, open_tag: str, close_tag: str) -> tuple[str, int] | None:
    """At `pos` (whitespace first): `open_tag`, text without ``<``, `close_tag`; the stripped
    text and the index after `close_tag`, or None."""
    i = _skip_space(body, pos)
    if not body.startswith(open_tag, i):
        return None
    j = body.find("<", i + len(open_tag))
    if j < 0 or not body.startswith(close_tag, j):
        return None
    return body[i + len(open_tag):j].strip(), j + len(close_tag)


def _skip_space(body: str, i: int) -> int:
    while i < len(body) and body[i].isspace():
        i += 1
    return i


def _action_head(body: str, start: int) -> tuple[str, int] | None:
    """``<action> <name>N</name> <code>`` at `start`: (N, index after ``<code>``)."""
    got = _between(body, start + len("<action>"), "<name>", "</name>")
    if got is None:
        return None
    i = _skip_space(body, got[1])
    return (got[0], i + len("<code>")) if body.startswith("<code>", i) else None


def _closing_tail(body: str, close: int) -> tuple[str | None, int] | None:
    """After a ``</code>`` at `close`: an optional ``<lang>`` and ``</action>``; (lang, end)."""
    i = close + len("</code>")
    lang: str | None = None
    m = _LANG_TAIL.match(body, i)
    if m:
        lang, i = m.group("lang").strip(), m.end()
    i = _skip_space(body, i)
    return (lang, i + len("</action>")) if body.startswith("</action>", i) else None


def _inner_fence(code: str) -> str | None:
    """The body of a code that is one fenced block (```lang, lines, ```), else None."""
    s = code.lstrip()
    if not s.startswith("```") or s[3:4] == "`":
        return None
    i = 3
    while i < len(s) and (s[i].isalnum() or s[i] in "_+"):
        i += 1
    while i < len(s) and s[i] in " \t":
        i += 1
    if not s.startswith("\n", i):
        return None
    rest = s[i + 1:].rstrip()
    if not rest.endswith("```"):
        return None
    body = rest[:-3]
    return body[:-1] if body.endswith("\n") else body


def xml_actions(text: str | None, finish_reason: str | None = None) -> dict[str, Code]:
    """The harness's XML actions by name (the last of a name wins, as in its dict); an
    action opened but never closed in a cut-off answer is ``truncated``.  Read in one pass:
    each ``<action>`` takes the first ``</code>`` after it that an ``</action>`` follows."""
    body = drop_thoughts(text or "")
    if len(body) > MAX_ANSWER_CHARS:
        return {}
    good = [c for c in _finds(body, "</code>") if _closing_tail(body, c) is not None]
    found: dict[str, Code] = {}
    pos = 0
    unclosed: tuple[str, int] | None = None
    while True:
        start = body.find("<action>", pos)
        if start < 0:
            break
        head = _action_head(body, start)
        if head is None:
            pos = start + 1
            continue
        k = bisect.bisect_left(good, head[1])
        if k == len(good):
            unclosed = unclosed or head  # no later action can close either
            break
        close = good[k]
        tail = _closing_tail(body, close)
        assert tail is not None
        code = body[head[1]:close]
        inner = _inner_fence(code)
        code = (inner if inner is not None else code).strip("\n")
        found[head[0]] = Code("ok" if code.strip() else "empty", _xml_lang(tail[0], code),
                              code + "\n" if code.strip() else None)
        pos = tail[1]
    if unclosed is not None and unclosed[0] not in found:
        rest = body[unclosed[1]:]
        code = rest.split("</code>")[0]
        cut = finish_reason == "length" or "</code>" not in rest
        found[unclosed[0]] = Code("truncated" if cut else "malformed_xml", _xml_lang(None, code), code)
    return found


def _finds(text: str, needle: str) -> list[int]:
    out, i = [], text.find(needle)
    while i >= 0:
        out.append(i)
        i = text.find(needle, i + 1)
    return out


def program(text: str | None, finish_reason: str | None = None, action_name: str = "print_fail_case") -> Code:
    """The one program a standard answer holds: the harness's XML action `action_name` (or
    the last XML action), else the last fenced code block."""
    actions = xml_actions(text, finish_reason)
    if actions:
        if action_name in actions:
            return actions[action_name]
        return list(actions.values())[-1]
    ex = extract_code(text, languages=tuple(LANGS), pick="last", finish_reason=finish_reason)
    if ex.code is None or ex.chosen is None:
        return Code(ex.outcome, None, None)
    return Code(ex.outcome, block_lang(ex.blocks[ex.chosen].language, ex.code), ex.code)


def _candidates(text: str) -> list[CodeBlock]:
    blocks = code_blocks(text)
    return [b for b in blocks if (not b.language or b.language in LANGS) and b.text.strip()]


def _role(text_lines: list[str], block: CodeBlock) -> str | None:
    """'brute' / 'generator' from the fence line and the three lines above it."""
    lo = max(0, block.start_line - 4)
    context = " ".join(text_lines[lo : block.start_line]).lower()
    brute = "brute" in context
    gen = "generat" in context
    if brute and gen:  # both named: the nearer line wins
        for line in reversed(text_lines[lo : block.start_line]):
            low = line.lower()
            if "brute" in low or "generat" in low:
                return "brute" if "brute" in low else "generator"
    return "brute" if brute else "generator" if gen else None


def randsearch(text: str | None, finish_reason: str | None = None) -> tuple[Code, Code]:
    """(brute force, generator) of a RandSearch answer: the harness's ``solve_brute`` and
    ``generate_tc`` actions, else two fenced blocks named by the lines above them."""
    if text is None or not text.strip():
        return Code("empty", None, None), Code("empty", None, None)
    actions = xml_actions(text, finish_reason)
    if actions:
        return (actions.get("solve_brute", Code("missing", None, None)),
                actions.get("generate_tc", Code("missing", None, None)))
    lines = text.splitlines()
    blocks = _candidates(text)
    roles: dict[str, CodeBlock] = {}
    unlabelled = []
    for b in blocks:
        role = _role(lines, b)
        if role and role not in roles:
            roles[role] = b
        else:
            unlabelled.append(b)
    how = "ok"
    if len(roles) < 2 and len(blocks) == 2 and not roles:
        roles, how = {"brute": blocks[0], "generator": blocks[1]}, "by_order"
    elif len(roles) == 1 and len(unlabelled) == 1:
        other = "generator" if "brute" in roles else "brute"
        roles[other], how = unlabelled[0], "by_order"

    def code(role: str) -> Code:
        b = roles.get(role)
        if b is None:
            return Code("no_block" if not blocks else "missing", None, None)
        if not b.closed or (finish_reason == "length" and b is blocks[-1]):
            return Code("truncated", block_lang(b.language, b.text), b.text)
        return Code(how, block_lang(b.language, b.text), b.text)

    return code("brute"), code("generator")


def _actions(text: str) -> list[str]:
    """The ``ACTION: EXECUTE|SUBMIT`` words at line starts (after spaces and emphasis), in
    order; a line at a time, so a long run of blank lines or stars costs linear time."""
    out: list[str] = []
    pos = 0
    while pos <= len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        i = pos
        while i < end and text[i].isspace():
            i += 1
        while i < end and text[i] == "*":
            i += 1
        while i < end and text[i].isspace():
            i += 1
        m = _ACTION.match(text, i)
        if m:
            out.append(m.group(1))
        pos = end + 1
    return out


@dataclass(frozen=True)
class Action:
    kind: str            # "execute" | "submit" | "none"
    code: Code
    stdin: str | None = None


def action(text: str | None, finish_reason: str | None = None) -> Action:
    """The agent's move: the last ``ACTION:`` line decides; without one, a reply holding code
    is a submission (what models do when they forget the protocol), else no action."""
    found = _actions(text or "")
    kind = found[-1].lower() if found else None
    stdin = None
    for b in code_blocks(text or ""):
        if b.language in ("input", "stdin", "text", "txt") and b.closed:
            stdin = b.text
    code = program(text, finish_reason)
    if kind is None:
        kind = "submit" if code.usable else "none"
    return Action(kind, code, stdin)
