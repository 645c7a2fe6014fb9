"""Errors raised by the expression language.

Every error names the expression text and, when known, *where* it sits in a manifest
(``config.checkout[0].branch``), so the engine only has to prefix the step alias to produce a
message a user can act on.
"""

from __future__ import annotations

from typing import TypeVar

from promoter.errors import LongshoremanError

_E = TypeVar("_E", bound="ExpressionError")


class ExpressionError(LongshoremanError):
    """An expression could not be compiled or evaluated.

    ``expression`` is the expression's source text (without the ``${{ }}`` delimiters);
    ``where`` names the manifest field, or is ``None`` when unknown; ``reason`` says what went
    wrong. Functions called from an expression raise it with only a reason,
    ``ExpressionError(reason="...")``: the evaluator fills in ``expression`` and ``where``.
    """

    def __init__(self, expression: str = "", where: str | None = None, reason: str = ""):
        self.expression = expression
        self.where = where
        self.reason = reason
        super().__init__(self._message())

    def _message(self) -> str:
        if not self.expression:
            text = self.reason
        else:
            text = f"expression {self.expression!r}: {self.reason}"
        return f"{self.where}: {text}" if self.where else text

    def __str__(self) -> str:
        return self._message()

    def __reduce__(self) -> tuple[type[ExpressionError], tuple[str, str | None, str]]:
        return (type(self), (self.expression, self.where, self.reason))

    def add_context(self: _E, *, expression: str, where: str | None) -> _E:
        """Fill in ``expression`` and ``where`` where still unknown; returns ``self``.

        The innermost code knows the most precise expression, so existing values win: a
        function's error keeps its reason and gains the manifest location as it propagates.
        """
        if not self.expression:
            self.expression = expression
        if self.where is None:
            self.where = where
        self.args = (self._message(),)
        return self


class ExpressionSyntaxError(ExpressionError):
    """An expression or template does not parse. Raised at compile time, before anything runs."""
