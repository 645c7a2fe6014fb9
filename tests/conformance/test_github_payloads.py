"""Our webhook payloads against GitHub's own samples, and those samples through our webhook.

tests/fixtures/github holds payloads we wrote in GitHub's documented shapes; the suite and the
fake GitHub build on them. Here they are held against GitHub's real samples
(``github/payloads/`` in the conformance folder): every field we wrote is one GitHub sends, at
the same place, with the same JSON type. Then every real sample is delivered, signed, to
``POST /github/webhook``: accepted, and handled without a handler failing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import conformance
from tests.support.fixtures import GITHUB
from tests.support.github_env import GitHubEnv, running_github_env
from tests.support.promotions import FakePromotions

SAMPLES = conformance.files("github/payloads", "*.payload.json")
OURS = sorted(GITHUB.glob("*.json"))


def event_of(path: Path) -> str:
    """``pull_request`` for ``pull_request.closed.with-organization.payload.json``."""
    return path.name.split(".", 1)[0]


def merged_shape(samples: list[Any]) -> Any:
    """One value with every key any of the samples has at each place (for a list: its items')."""
    known = [s for s in samples if s is not None]
    if not known:
        return None
    if all(isinstance(s, dict) for s in known):
        keys = {k for s in known for k in s}
        return {k: merged_shape([s.get(k) for s in known]) for k in keys}
    if all(isinstance(s, list) for s in known):
        return [merged_shape([item for s in known for item in s])]
    return known[0]


def shape_problems(ours: Any, github: Any, where: str = "") -> list[str]:
    """Where ``ours`` has a key GitHub's samples never have there, or another JSON type."""
    if ours is None or github is None:  # null: GitHub sends most fields as null at times
        return []
    if isinstance(ours, dict):
        if not isinstance(github, dict):
            return [f"{where or '<root>'}: an object where GitHub sends {type(github).__name__}"]
        problems = []
        for key, value in ours.items():
            if key not in github:
                problems.append(f"{where}.{key}: not in GitHub's samples")
            else:
                problems += shape_problems(value, github[key], f"{where}.{key}")
        return problems
    if isinstance(ours, list):
        if not isinstance(github, list):
            return [f"{where}: an array where GitHub sends {type(github).__name__}"]
        if not github or github[0] is None:
            return []
        return [p for item in ours for p in shape_problems(item, github[0], f"{where}[]")]
    numbers = (int, float)
    same = type(ours) is type(github) or (
        isinstance(ours, numbers)
        and isinstance(github, numbers)
        and not isinstance(ours, bool)
        and not isinstance(github, bool)
    )
    if same:
        return []
    return [f"{where}: {type(ours).__name__} where GitHub sends {type(github).__name__}"]


def test_every_event_we_fake_has_a_github_sample() -> None:
    assert OURS, f"no payloads in {GITHUB}"
    missing = {event_of(p) for p in OURS} - {event_of(p) for p in SAMPLES}
    assert not missing, f"no GitHub sample of {sorted(missing)}"


@pytest.mark.parametrize("ours", OURS, ids=lambda p: p.stem)
def test_our_payload_has_githubs_shape(ours: Path) -> None:
    samples = [json.loads(p.read_text()) for p in SAMPLES if event_of(p) == event_of(ours)]
    problems = shape_problems(json.loads(ours.read_text()), merged_shape(samples))
    assert problems == []


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[GitHubEnv]:
    async with running_github_env(
        tmp_path, repo="Codertocat/Hello-World", service=FakePromotions()
    ) as env:
        yield env


@pytest.mark.parametrize(
    ("event", "body"),
    [pytest.param(event_of(p), p.read_bytes(), id=p.name.split(".payload")[0]) for p in SAMPLES],
)
async def test_githubs_sample_is_accepted_and_handled(
    bot: GitHubEnv, event: str, body: bytes
) -> None:
    status, answer = await bot.send(event, body)
    assert status in (200, 202), answer
    await bot.settle()
    assert bot.telemetry.failed() == 0
