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

    ``reason`` says what went wrong; ``expression`` is the expression's source text (without the
    ``${{ }}`` delimiters); ``where`` names the manifest field, or is ``None`` when unknown.
    Functions called from an expression may raise it with only a reason: the evaluator fills in
    ``expression`` and ``where``.
    """

    def __init__(self, reason: str, *, expression: str = "", where: str | None = None):
        self.reason = reason
        self.expression = expression
        self.where = where
        super().__init__(self._message())

    def _message(self) -> str:
        if not self.expression:
            text = self.reason
        else:
            text = f"expression {self.expression!r}: {self.reason}"
        return f"{self.where}: {text}" if self.where else text

    def __str__(self) -> str:
        return self._message()

    def with_context(self: _E, *, expression: str | None = None, where: str | None = None) -> _E:
        """A copy of this error naming ``expression`` and ``where`` (existing values win).

        The innermost code knows the most precise expression; outer layers only add what is
        still missing, so a function's error keeps its reason and gains the manifest location.
        """
        new = type(self)(
            self.reason,
            expression=self.expression or (expression or ""),
            where=self.where or where,
        )
        new.__cause__ = self.__cause__
        return new


class ExpressionSyntaxError(ExpressionError):
    """An expression or template does not parse. Raised at compile time, before anything runs."""
