"""Kargo objects for pipeline pictures, as plain dicts: Stages wired by ``requestedFreight``,
Freight with aliases, Stages holding Freight, Promotions and a Warehouse with discovered
artifacts. Shared by the graph and timeline tests and ``bench/bench_pages.py``. Each picture's
defaults (project ``shop``, its image, its times) sit on top of :mod:`tests.support.objects`,
which builds every object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from tests.support import objects

NS = "shop"
WAREHOUSE = "shop-images"


def freight_name(seed: str) -> str:
    return hashlib.sha1(seed.encode()).hexdigest()


def stage(
    name: str,
    *,
    direct: str | None = None,
    upstream: Sequence[str] = (),
    warehouse: str = WAREHOUSE,
    namespace: str = NS,
) -> dict[str, Any]:
    """A Stage taking ``warehouse``'s Freight directly (``direct`` names the Warehouse) or from
    the ``upstream`` Stages."""
    return objects.stage(
        name,
        namespace=namespace,
        warehouse=direct or warehouse,
        sources={"direct": True} if direct else {"stages": list(upstream)},
        steps=[{"uses": "compose-output", "config": {}}],
    )


def freight(
    alias: str,
    created: str,
    *,
    tag: str = "1.0.0",
    verified_in: Sequence[str] = (),
    warehouse: str = WAREHOUSE,
    namespace: str = NS,
) -> dict[str, Any]:
    return objects.freight(
        freight_name(alias),
        namespace=namespace,
        alias=alias,
        warehouse=warehouse,
        created=created,
        images=[{"repoURL": "ghcr.io/example/shop", "tag": tag}],
        status={"verifiedIn": {s: {"verifiedAt": created} for s in verified_in}},
    )


def holding(
    stage_obj: dict[str, Any],
    freight_obj: dict[str, Any],
    *,
    health: str = "True",
    verified: str = "Verified",
) -> dict[str, Any]:
    """``stage_obj`` with ``freight_obj`` as its current Freight, its health condition and its
    Verified condition's reason (``Verified``, ``Verifying``, ``VerificationFailed``...)."""
    origin = freight_obj["origin"]
    ref = {"name": freight_obj["metadata"]["name"], "origin": origin}
    verification = [{"id": "v1", "phase": "Successful"}] if verified == "Verified" else []
    verified_status = {"Verified": "True", "VerificationFailed": "False"}.get(verified, "Unknown")
    return {
        **stage_obj,
        "status": {
            "freightHistory": [
                {
                    "id": "c1",
                    "items": {f"Warehouse/{origin['name']}": ref},
                    "verificationHistory": verification,
                }
            ],
            "conditions": [
                {"type": "Healthy", "status": health, "reason": ""},
                {"type": "Verified", "status": verified_status, "reason": verified},
            ],
        },
    }


def promotion(
    name: str, stage_name: str, freight_obj: dict[str, Any], phase: str, *, namespace: str = NS
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase} if phase != "Pending" else {}
    if phase in ("Succeeded", "Failed"):
        status |= {"startedAt": "2026-01-01T10:00:00Z", "finishedAt": "2026-01-01T10:01:00Z"}
    elif phase == "Running":
        status |= {"startedAt": "2026-01-01T10:00:00Z"}
    return objects.promotion(
        name,
        stage_name,
        namespace=namespace,
        freight=freight_obj["metadata"]["name"],
        steps=[{"uses": "compose-output", "config": {}}],
        created="2026-01-01T09:59:00Z",
        status=status,
    )


def warehouse(name: str = WAREHOUSE, *, namespace: str = NS, tag: str = "1.4.0") -> dict[str, Any]:
    return objects.warehouse(
        name,
        namespace=namespace,
        subscriptions=[{"image": {"repoURL": "ghcr.io/example/shop"}}],
        status={
            "discoveredArtifacts": {
                "discoveredAt": "2026-01-01T09:00:00Z",
                "images": [
                    {
                        "repoURL": "ghcr.io/example/shop",
                        "references": [{"tag": tag}, {"tag": "1.3.0"}],
                    }
                ],
                "git": [
                    {
                        "repoURL": "https://github.com/example/shop-config.git",
                        "commits": [{"id": "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"}],
                    }
                ],
            }
        },
    )


def big_project(stage_count: int = 50, freight_count: int = 30) -> dict[str, list[dict[str, Any]]]:
    """A project of ``stage_count`` Stages in waves of five (each Stage takes Freight from one
    or two of the wave before it: fan-out and fan-in), every Stage holding Freight, some
    Promotions running and queued, and ``freight_count`` Freight."""
    freights = [
        freight(f"release-{i:03d}", f"2026-01-01T{i // 60:02d}:{i % 60:02d}:00Z", tag=f"1.{i}.0")
        for i in range(freight_count)
    ]
    stages: list[dict[str, Any]] = []
    promotions: list[dict[str, Any]] = []
    for i in range(stage_count):
        wave, place = divmod(i, 5)
        name = f"s{wave:02d}-{place}"
        if wave == 0:
            obj = stage(name, direct=WAREHOUSE)
        else:
            before = [f"s{wave - 1:02d}-{place}", f"s{wave - 1:02d}-{(place + 1) % 5}"]
            obj = stage(name, upstream=before[: 1 + place % 2])
        held = freights[max(0, freight_count - 1 - wave)]
        stages.append(holding(obj, held, verified="Verified" if place % 3 else "Verifying"))
        promotions.append(promotion(f"{name}.done", name, held, "Succeeded"))
        if place == 0:
            promotions.append(promotion(f"{name}.run", name, freights[-1], "Running"))
            promotions.append(promotion(f"{name}.next", name, freights[-1], "Pending"))
    return {
        "stages": stages,
        "promotions": promotions,
        "freights": freights,
        "warehouses": [warehouse()],
    }
