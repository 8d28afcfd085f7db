"""What a rule sees: one :class:`Context` per module (the model, the values, the facts, the keys, the taint
and the report), and nothing of the stages' internals.

Rules take part twice. While the facts are collected, a rule's method hooks (its extractors) see a context
whose ``facts`` is the :class:`~upsertsink.lint.flow.facts.Collector` (to add row choices and the rule's own
facts) and whose ``keys`` and ``taint`` are None: no data flow exists yet. Once the facts are frozen, its
module hooks see the full context and report findings with :meth:`Context.report`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.structs import field, struct
from ..base.types import FixSpec, Reach, Span, Src

if TYPE_CHECKING:
    from ..model.semantic import SemanticModel
    from ..values.evaluate import Values
    from .facts import Collector, Facts
    from .keys import Keys
    from .taint import Taint


@struct
class Context:
    model: SemanticModel
    values: Values
    facts: Facts | Collector
    keys: Keys | None = None
    taint: Taint | None = None
    reported: list[Reach] = field(default_factory=list)

    def report(
        self,
        rule: str,
        span: Span,
        note: str,
        level: str,
        column: str = "*",
        advice: str = "write",
        fix: FixSpec | None = None,
        alt_line: int = 0,
    ) -> None:
        """A finding of a rule that reports directly (a module hook): ``note`` says what was found and where
        (the message adds why it breaks a replay and the fix advice ``advice`` names); the JSON target is
        ``write`` and ``column`` the column it concerns (``*``: the whole row)."""
        src = Src(rule, *span, note, alt_line=alt_line, fix=fix)
        self.reported.append(Reach(src, "write", column, level=level, note=note, advice=advice))
