"""What an advise rule is (msprof.analysis.advise): its parts and the numbers its findings print, here so that
the rules of other modules (msprof.analysis.family_rules) are written as advise's are."""
from dataclasses import dataclass
from typing import Callable, Iterable, List

from msprof.analysis.facts import Facts
from msprof.contract import Selection


@dataclass
class Hit:
    """What a rule's check found: one finding before its message is written."""

    severity: str
    impact: float            # share (0..1) of the time the advice could save, at best
    fields: dict             # the message template's fields
    evidence: List[dict]


@dataclass(frozen=True)
class Rule:
    id: str
    check: Callable[[Facts, Selection], Iterable["Hit"]]
    message: str             # str.format template over Hit.fields
    evidence_line: object    # str.format template over an evidence item's key and values, for the table
    #                          view; or {evidence table: template} when a rule cites several tables


def grade(share: float, high: float, medium: float) -> str:
    return "high" if share >= high else "medium" if share >= medium else "info"


def us(value: float) -> float:
    """µs as findings print them: 3 decimals (never -0.0)."""
    return round(value, 3) or 0.0


def pct(part: float, whole: float) -> float:
    """A share as findings print it: a percentage with 2 decimals (0 of nothing)."""
    return round(part * 100.0 / whole, 2) if whole else 0.0
