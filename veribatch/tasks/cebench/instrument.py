"""§3.2.1: the program a counterexample is labelled with, and the one a model is shown.

Given a counterexample state s of category c, the original post-condition is dropped
and ``__VERIFIER_assert(!(s))`` is placed

* before the first statement of the loop body for Inductive and SAT_Pre (a state about
  to run the body), and
* after the last statement of the loop body for UNSAT_Pre (a state at the end of an
  iteration),

in the normalised SV-COMP program (`program`), which the embedded verifier and
UAutomizer both read.  The verifier's FALSE means the assertion fails on a feasible path
— s is reached there (GENUINE); TRUE means it never fails — s is unreachable (SPURIOUS).

A model is shown the same program without the assertion, with a ``CHECK POINT`` comment
where it would be (`prompt_program`), and the state as ``x = 1, y = 0``; it is never told
the category.
"""

from __future__ import annotations

from dataclasses import dataclass

from veribatch.tasks.cebench.counterexamples import SITES
from veribatch.tasks.cebench.program import LoopProgram, Site


@dataclass(frozen=True)
class Instrumented:
    site: Site
    assertion: str   # the C condition asserted: !(state)
    program: str     # the whole SV-COMP program the verifier reads


def instrument(prog: LoopProgram, state: dict[str, int], category: str) -> Instrumented:
    site = SITES[category]
    return Instrumented(site, f"!({prog.state_expr(state)})", prog.instrumented(state, site))


def prompt_program(prog: LoopProgram, category: str) -> str:
    return prog.display(SITES[category])
