"""What one module writes into an annotation, another reads back the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from promoter.resources import annotations as ann


def _with(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "x", "annotations": annotations}}


def test_an_abort_written_by_chat_is_read_by_the_controller() -> None:
    assert ann.abort_request(_with(ann.abort("slack:T/U1"))) == "slack:T/U1"


@pytest.mark.parametrize(
    ("annotations", "actor"),
    [
        ({"longshoreman.dev/abort": "terminate"}, "unknown"),
        ({"kargo.akuity.io/abort": json.dumps({"action": "terminate", "actor": "a"})}, "a"),
        ({"longshoreman.dev/abort": json.dumps({"action": "refresh"})}, None),
        ({"longshoreman.dev/abort": "{not json"}, None),
        ({}, None),
    ],
)
def test_abort_requests_in_our_and_kargos_forms(
    annotations: dict[str, str], actor: str | None
) -> None:
    assert ann.abort_request(_with(annotations)) == actor


def test_create_actor_and_reverify_round_trip() -> None:
    assert ann.created_by(_with(ann.create_actor("github:alice"))) == "github:alice"
    assert ann.created_by(_with({"kargo.akuity.io/create-actor": "admin"})) == "admin"
    request = ann.reverify_request(_with(ann.reverify("u", datetime(2024, 1, 1, tzinfo=UTC))))
    assert json.loads(request or "{}") == {"actor": "u", "at": "2024-01-01T00:00:00+00:00"}


def test_json_annotations_that_a_person_broke_read_as_empty() -> None:
    assert ann.read_json(_with({ann.GITHUB_REPLY: "[1]"}), ann.GITHUB_REPLY) == {}
    assert ann.read_json(_with({ann.GITHUB_REPLY: '{"id": 1}'}), ann.GITHUB_REPLY) == {"id": 1}
