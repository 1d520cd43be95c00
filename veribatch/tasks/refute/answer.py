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

import re
from dataclasses import dataclass

from veribatch.tasks.extract import CodeBlock, code_blocks, extract_code

LANGS = {"python": "python", "py": "python", "python3": "python", "py3": "python",
         "cpp": "cpp", "c++": "cpp", "cc": "cpp", "cxx": "cpp"}
_ACTION = re.compile(r"^\s*\**\s*ACTION\s*:\s*(EXECUTE|SUBMIT)\b", re.IGNORECASE | re.MULTILINE)
PARSER_VERSION = "refute-answer-2"
_THOUGHTS = re.compile(r"<thoughts>.*</thoughts>|<think>.*?(</think>|\Z)", re.DOTALL)
"""The harness's R1 client wrapped the reasoning in ``<thoughts>``; open-weight reasoning
models write ``<think>``: an action drafted while thinking (or a thought cut off by the
token limit) is never the answer."""
_XML_ACTION = re.compile(
    r"<action>\s*<name>\s*(?P<name>[^<]*?)\s*</name>\s*<code>(?P<code>.*?)</code>"
    r"(?:\s*<lang>\s*(?P<lang>[^<]*?)\s*</lang>)?\s*</action>", re.DOTALL)
_XML_OPEN = re.compile(r"<action>\s*<name>\s*(?P<name>[^<]*?)\s*</name>\s*<code>", re.DOTALL)
_INNER_FENCE = re.compile(r"^\s*```[\w+]*[ \t]*\n(?P<body>.*?)\n?```\s*$", re.DOTALL)


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


def xml_actions(text: str | None, finish_reason: str | None = None) -> dict[str, Code]:
    """The harness's XML actions by name (the last of a name wins, as in its dict); an
    action opened but never closed in a cut-off answer is ``truncated``."""
    body = _THOUGHTS.sub("", text or "")
    found: dict[str, Code] = {}
    end = 0
    for m in _XML_ACTION.finditer(body):
        code = m.group("code")
        inner = _INNER_FENCE.match(code)
        code = (inner.group("body") if inner else code).strip("\n")
        found[m.group("name")] = Code("ok" if code.strip() else "empty", _xml_lang(m.group("lang"), code),
                                      code + "\n" if code.strip() else None)
        end = m.end()
    tail = _XML_OPEN.search(body, end)
    if tail is not None and tail.group("name") not in found:
        rest = body[tail.end():]
        code = rest.split("</code>")[0]
        cut = finish_reason == "length" or "</code>" not in rest
        found[tail.group("name")] = Code("truncated" if cut else "malformed_xml", _xml_lang(None, code), code)
    return found


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


@dataclass(frozen=True)
class Action:
    kind: str            # "execute" | "submit" | "none"
    code: Code
    stdin: str | None = None


def action(text: str | None, finish_reason: str | None = None) -> Action:
    """The agent's move: the last ``ACTION:`` line decides; without one, a reply holding code
    is a submission (what models do when they forget the protocol), else no action."""
    found = _ACTION.findall(text or "")
    kind = found[-1].lower() if found else None
    stdin = None
    for b in code_blocks(text or ""):
        if b.language in ("input", "stdin", "text", "txt") and b.closed:
            stdin = b.text
    code = program(text, finish_reason)
    if kind is None:
        kind = "submit" if code.usable else "none"
    return Action(kind, code, stdin)
