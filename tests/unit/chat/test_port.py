"""The chat port's plain data: a Promotion reference read from the object."""

from __future__ import annotations

from typing import Any

import pytest

from promoter.chat.port import PromotionRef
from tests.support import objects


@pytest.mark.parametrize(
    ("status", "phase", "message"),
    [
        (None, "Pending", ""),  # just created: no status yet
        ({"phase": "Running"}, "Running", ""),
        ({"phase": "Failed", "message": "git-push: refused"}, "Failed", "git-push: refused"),
    ],
)
def test_a_promotion_ref_names_the_objects_stage_freight_and_phase(
    status: dict[str, Any] | None, phase: str, message: str
) -> None:
    obj = objects.promotion("test.01", "test", namespace="p", freight="f1", status=status)
    assert PromotionRef.of(obj) == PromotionRef("p", "test.01", "test", "f1", phase, message)
