"""The project page's pipeline graph and Freight timeline, without a server: the layered layout
(app.ui.layout), what the graph says (app.ui.graph.pipeline_graph), its SVG and the timeline
(app.ui.timeline). The browser test (tests/e2e/test_pages_browser.py) looks at the drawn page."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from app.ui import html as h
from app.ui.freight import Artifact as FreightArtifact
from app.ui.freight import freight_page
from app.ui.graph import (
    MissingNode,
    StageNode,
    WarehouseNode,
    graph_html,
    pipeline_graph,
    promotion_href,
    stage_href,
)
from app.ui.html import timeline_html
from app.ui.layout import Box, CycleError, crossings, layers_of, layout
from app.ui.timeline import freight_timeline
from app.ui.views import project_view
from tests.support import pipelines as p

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SVG = "{http://www.w3.org/2000/svg}"


def overlap(a: Box, b: Box) -> bool:
    return (
        a.x < b.x + b.width
        and b.x < a.x + a.width
        and a.y < b.y + b.height
        and b.y < a.y + a.height
    )


# ---- layout ------------------------------------------------------------------------------------


def test_a_chain_takes_one_layer_per_node_and_stays_on_one_line() -> None:
    drawn = layout(["w", "test", "uat", "prod"], [("w", "test"), ("test", "uat"), ("uat", "prod")])
    assert drawn.layers == [["w"], ["test"], ["uat"], ["prod"]]
    assert len({b.y for b in drawn.boxes.values()}) == 1
    xs = [drawn.boxes[n].x for n in ("w", "test", "uat", "prod")]
    assert xs == sorted(xs) and len(set(xs)) == 4  # left to right
    for route in drawn.routes:  # straight: from the right side to the next left side
        assert route.points[0] == drawn.boxes[route.source].right_port
        assert route.points[-1] == drawn.boxes[route.target].left_port


def test_a_fan_out_shares_the_next_layer_centred_on_its_parent() -> None:
    drawn = layout(["uat", "eu", "us", "ap"], [("uat", "eu"), ("uat", "us"), ("uat", "ap")])
    assert drawn.layers == [["uat"], ["ap", "eu", "us"]]
    children = [drawn.boxes[n] for n in ("ap", "eu", "us")]
    parent = drawn.boxes["uat"]
    middle = sum(b.y + b.height / 2 for b in children) / 3
    assert middle == pytest.approx(parent.y + parent.height / 2)
    assert not any(overlap(a, b) for a, b in itertools.combinations(children, 2))


def test_a_fan_in_layers_a_node_after_its_furthest_upstream() -> None:
    edges = [("w", "a"), ("a", "b"), ("b", "c"), ("w", "c"), ("a", "c")]
    assert layers_of(["w", "a", "b", "c"], edges) == {"w": 0, "a": 1, "b": 2, "c": 3}
    drawn = layout(["w", "a", "b", "c"], edges)
    # The edges that skip layers bend through one point pair per layer they pass.
    long = {(r.source, r.target): r for r in drawn.routes}
    assert len(long[("w", "c")].points) == 2 + 2 * 2
    assert len(long[("a", "c")].points) == 2 + 2 * 1
    for source, target in long:
        assert drawn.boxes[source].x < drawn.boxes[target].x


def test_barycentre_ordering_untangles_crossing_edges() -> None:
    # Named so that alphabetical order crosses: a->z, b->y.
    edges = [("a", "z"), ("b", "y"), ("a", "x"), ("b", "w")]
    drawn = layout(["a", "b", "w", "x", "y", "z"], edges)
    assert crossings(drawn.layers, edges) == 0
    assert crossings([["a", "b"], ["w", "x", "y", "z"]], edges) > 0  # what sorting alone gives


def test_no_two_nodes_overlap_and_all_fit_the_canvas() -> None:
    project = p.big_project(50)
    stages = project["stages"]
    graph = pipeline_graph(p.NS, stages, [], project["freights"], project["warehouses"])
    assert graph.layout is not None
    boxes = list(graph.layout.boxes.values())
    assert len(boxes) == 51
    assert not any(overlap(a, b) for a, b in itertools.combinations(boxes, 2))
    for b in boxes:
        assert 0 <= b.x and b.x + b.width <= graph.layout.width
        assert 0 <= b.y and b.y + b.height <= graph.layout.height


@pytest.mark.parametrize(
    ("edges", "cycle"),
    [
        ([("a", "b"), ("b", "c"), ("c", "a")], ["a", "b", "c", "a"]),
        ([("w", "a"), ("a", "b"), ("b", "a"), ("b", "c")], ["a", "b", "a"]),
        ([("a", "a")], ["a", "a"]),
    ],
)
def test_a_cycle_is_refused_and_named(edges: list[tuple[str, str]], cycle: list[str]) -> None:
    nodes = sorted({n for e in edges for n in e})
    with pytest.raises(CycleError) as error:
        layout(nodes, edges)
    assert error.value.cycle == cycle


# ---- what the graph says ------------------------------------------------------------------------


def pipeline_objects() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    older = p.freight("mellow-otter", "2026-01-01T08:00:00Z", verified_in=["test", "uat"])
    newer = p.freight("brave-falcon", "2026-01-01T09:00:00Z", verified_in=["test"])
    stages = [
        p.holding(p.stage("test", direct=p.WAREHOUSE), newer),
        p.holding(p.stage("uat", upstream=["test"]), older, verified="Verifying"),
        p.holding(p.stage("prod-eu", upstream=["uat"]), older, health="False"),
        p.stage("prod-us", upstream=["uat"]),
    ]
    return stages, [older, newer]


def test_edges_come_from_direct_sources_and_upstream_stages() -> None:
    stages, freights = pipeline_objects()
    stages.append(p.stage("canary", upstream=["uat", "gone"]))
    graph = pipeline_graph(p.NS, stages, [], freights)
    edges = {(e.source, e.target) for e in graph.edges}
    assert edges == {
        ("warehouse:shop-images", "stage:test"),
        ("stage:test", "stage:uat"),
        ("stage:uat", "stage:prod-eu"),
        ("stage:uat", "stage:prod-us"),
        ("stage:uat", "stage:canary"),
        ("missing:gone", "stage:canary"),  # a typo'd upstream shows, dashed
    }
    assert isinstance(graph.node("missing:gone"), MissingNode)
    assert graph.stage_order[:2] == ["test", "uat"]


def test_stage_nodes_show_the_freight_alias_health_in_words_verification_and_the_queue() -> None:
    stages, freights = pipeline_objects()
    promotions = [
        p.promotion("uat.run", "uat", freights[1], "Running"),
        p.promotion("uat.next", "uat", freights[1], "Pending"),
        p.promotion("uat.later", "uat", freights[1], "Pending"),
    ]
    view = project_view(p.NS, stages, promotions, freights, now=NOW)
    assert view.graph is not None
    nodes = {n.name: n for n in view.graph.nodes if isinstance(n, StageNode)}
    assert nodes["test"].freight == ("brave-falcon",)
    assert nodes["test"].health == "Healthy"  # never the condition's "True"
    assert nodes["prod-eu"].health == "Unhealthy"
    assert nodes["prod-us"].health == "Unknown" and nodes["prod-us"].freight == ()
    assert nodes["uat"].verification_text == ("Verifying", "run")
    assert (nodes["uat"].running, nodes["uat"].queued) == ("uat.run", 2)

    svg = graph_html(view.graph)
    uat = re.search(r'<g class="node stage[^"]*" data-node="stage:uat".*?</a></g>', svg, re.S)
    assert uat is not None
    assert 'class="node stage h-ok running"' in uat[0]
    assert ">running<" in uat[0] and ">+2 queued<" in uat[0]
    assert ">mellow-otter<" in uat[0] and ">Verifying<" in uat[0]
    assert ">True<" not in svg


def test_a_failed_last_promotion_and_a_frozen_stage_show_on_the_node_with_what_waits() -> None:
    stages, freights = pipeline_objects()
    stages[2]["status"]["promotionWindowStatus"] = {
        "closed": True,
        "reason": "Deny window `weekend-freeze` is in effect",
        "nextOpen": "2026-01-12T08:00:00Z",
    }
    promotions = [
        p.promotion("uat.bad", "uat", freights[1], "Failed"),
        p.promotion("prod-eu.held", "prod-eu", freights[0], "Pending"),
    ]
    view = project_view(p.NS, stages, promotions, freights, now=NOW)
    assert view.graph is not None
    nodes = {n.name: n for n in view.graph.nodes if isinstance(n, StageNode)}
    # Still Healthy on its old Freight, but its last Promotion failed: the node says so.
    assert nodes["uat"].health == "Healthy" and nodes["uat"].failed == ("uat.bad", "Failed")
    assert nodes["prod-eu"].frozen == (
        "frozen until 2026-01-12 08:00 UTC: Deny window `weekend-freeze` is in effect"
    )

    svg = graph_html(view.graph)
    uat = re.search(r'<g class="node stage[^"]*" data-node="stage:uat".*?</a></g>', svg, re.S)
    assert uat is not None and "failed" in uat[0].split('"')[1]
    assert ">last Failed<" in uat[0]
    eu = re.search(r'<g class="node stage[^"]*" data-node="stage:prod-eu".*?</a></g>', svg, re.S)
    assert eu is not None
    assert ">frozen until 2026-01-12 08:00 UTC<" in eu[0] and ">+1 queued, held<" in eu[0]
    assert "weekend-freeze" in eu[0]  # the window, in the tooltip
    listed = re.sub(r"<[^>]+>", "", svg)
    assert "Last Promotion uat.bad Failed." in listed
    assert "It is frozen until 2026-01-12 08:00 UTC: Deny window" in listed
    assert "the queue waits." in listed


def test_warehouse_nodes_show_the_latest_artifacts_when_warehouses_are_kept() -> None:
    stages, freights = pipeline_objects()
    bare = pipeline_graph(p.NS, stages, [], freights)  # no Warehouse cache: the name only
    assert bare.node("warehouse:shop-images") == WarehouseNode("shop-images")
    kept = pipeline_graph(p.NS, stages, [], freights, [p.warehouse(tag="1.4.0")])
    node = kept.node("warehouse:shop-images")
    assert isinstance(node, WarehouseNode) and node.known
    assert [a.short for a in node.artifacts] == ["shop:1.4.0", "shop-config@0a1b2c3"]
    assert "shop:1.4.0" in graph_html(kept) and "shop:1.4.0" not in graph_html(bare)


def test_generic_subscriptions_show_their_newest_artifact_on_the_graph_and_freight_page() -> None:
    stages, freights = pipeline_objects()
    warehouse = p.warehouse(tag="1.4.0")
    ref = {"artifactType": "application/gzip", "subscriptionName": "bucket", "version": "v7"}
    warehouse["status"]["discoveredArtifacts"]["results"] = [
        {"name": "bucket", "artifactReferences": [ref, {**ref, "version": "v6"}]}
    ]
    node = pipeline_graph(p.NS, stages, [], freights, [warehouse]).node("warehouse:shop-images")
    assert isinstance(node, WarehouseNode)
    assert [(a.short, a.full) for a in node.artifacts][-1] == (
        "bucket v7",
        "bucket application/gzip v7",
    )
    freight = {**freights[0], "artifacts": [ref]}
    page = freight_page(p.NS, freight, stages, [], [freight], order=[], windows={}, now=None)
    assert page.artifacts[-1] == FreightArtifact("artifact", "bucket", "v7", "application/gzip")
    timeline = freight_timeline(stages, [], [freight], order=[], now=None)
    assert "bucket v7" in timeline.entries[0].artifacts


def test_the_svg_escapes_names_and_links_every_node_to_its_page() -> None:
    hostile = '<script>alert("x")</script>&'
    stages = [p.stage("test", direct=hostile), p.stage("uat", upstream=["test", hostile])]
    # A Stage named with characters that need quoting in a URL (and in XML).
    stages.append(p.stage('a"b<c', upstream=["uat"]))
    freight = p.freight(hostile, "2026-01-01T08:00:00Z")
    stages[0] = p.holding(stages[0], freight)
    graph = pipeline_graph(p.NS, stages, [], [freight])
    markup = graph_html(graph)
    assert "<script>" not in markup
    svg_text = re.search(r"<svg class=\"pipeline\".*?</svg>", markup, re.S)
    assert svg_text is not None
    root = ET.fromstring(svg_text[0])  # well-formed XML: everything escaped
    assert root.get("role") == "img" and "Pipeline of project shop" in (
        root.get("aria-label") or ""
    )
    assert root.find(f"{SVG}title") is not None and root.find(f"{SVG}desc") is not None
    links = {a.get("href") for a in root.iter(f"{SVG}a")}
    assert stage_href(p.NS, 'a"b<c') in links
    assert "/ui/stages/shop/a%22b%3Cc" in links
    assert "/ui/stages/shop/test" in links and "/ui/stages/shop/uat" in links
    assert "#pipeline-warehouse-" + hostile in links  # to its entry in the list
    # Shown as text: cut to fit the node, whole in its tooltip.
    assert '<script>alert("x")</…' in [t.text for t in root.iter(f"{SVG}text")]
    assert any(hostile in (t.text or "") for t in root.iter(f"{SVG}title"))
    # The text equivalent names every node and edge.
    listing = re.search(r'<ul class="sr-only pipeline-list">(.*?)</ul>', markup, re.S)
    assert listing is not None
    assert "test (Stage). Passes it to a&quot;b&lt;c." in listing[1]  # uat's entry
    assert "(Warehouse). Passes it to test." in listing[1]


def test_graph_links_use_the_pages_paths() -> None:
    for name in ("test", "a b", "ü/x", "%2F"):
        assert stage_href("ns 1", name) == h.stage_path("ns 1", name)
        assert promotion_href("ns 1", name) == h.promotion_path("ns 1", name)


def test_a_cycle_is_explained_instead_of_drawn() -> None:
    stages = [
        p.stage("a", upstream=["c"]),
        p.stage("b", upstream=["a"]),
        p.stage("c", upstream=["b"]),
        p.stage("test", direct=p.WAREHOUSE),
    ]
    graph = pipeline_graph(p.NS, stages, [], [])
    assert graph.layout is None and graph.cycle == ("a", "b", "c", "a")
    markup = graph_html(graph)
    assert '<svg class="pipeline"' not in markup
    assert "form a cycle (<code>a → b → c → a</code>)" in markup
    assert 'href="/ui/stages/shop/test"' in markup  # the list still links every Stage
    assert graph.stage_order == ["a", "b", "c", "test"]


# ---- the Freight timeline ------------------------------------------------------------------------


def test_the_timeline_says_where_each_freight_is_and_where_it_was_verified() -> None:
    stages, freights = pipeline_objects()
    newest = p.freight("quiet-lynx", "2026-01-01T10:00:00Z")
    promotions = [
        p.promotion("test.run", "test", newest, "Running"),
        p.promotion("test.next", "test", newest, "Pending"),
    ]
    timeline = freight_timeline(
        stages,
        promotions,
        [*freights, newest],
        order=["test", "uat", "prod-eu", "prod-us"],
        now=NOW,
    )
    entries = {e.alias: e for e in timeline.entries}
    assert [e.alias for e in timeline.entries] == ["quiet-lynx", "brave-falcon", "mellow-otter"]
    assert entries["mellow-otter"].now_in == ("uat", "prod-eu")
    assert entries["mellow-otter"].verified_in == ("test", "uat", "prod-eu")  # + history
    assert entries["brave-falcon"].now_in == ("test",)
    assert entries["quiet-lynx"].promoting == (("test", "running, 1 queued"),)
    # Waiting: available, and newer than what the Stage holds (prod-us holds nothing).
    assert entries["brave-falcon"].waiting == ("uat",)
    assert entries["mellow-otter"].waiting == ("prod-us",)
    assert entries["quiet-lynx"].waiting == ()  # test is already promoting it

    markup = timeline_html(p.NS, timeline)
    item = re.search(r'<li class="freight"[^>]*data-alias="brave-falcon">.*?</ul></li>', markup)
    assert item is not None
    text = re.sub(r"<[^>]+>", "", item[0])
    assert "Now in test" in text and "Verified in test" in text and "Waiting for uat" in text


def test_the_timeline_shows_the_newest_freight_and_counts_the_rest() -> None:
    project = p.big_project(10, freight_count=40)
    timeline = freight_timeline(
        project["stages"], project["promotions"], project["freights"], order=[], limit=15
    )
    assert len(timeline.entries) == 15 and timeline.older == 25
    assert timeline.entries[0].alias == "release-039"
    assert "25 older Freight not shown" in timeline_html(p.NS, timeline)


def test_credentials_in_artifact_urls_are_masked_in_the_graph_and_the_timeline() -> None:
    stages, freights = pipeline_objects()
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    kept = p.warehouse()
    kept["status"]["discoveredArtifacts"]["git"][0]["repoURL"] = f"https://{token}@github.com/x.git"
    freights[1]["commits"] = [{"repoURL": f"https://bot:{token}@github.com/x.git", "id": "abc1234"}]
    view = project_view(p.NS, stages, [], freights, warehouses=[kept], now=NOW)
    page = h.project_fragment(view)
    assert token not in page
    assert "https://••••••@github.com/x.git@0a1b2c3" in page  # the Warehouse's commit, tooltip
    assert "https://bot:••••••@github.com/x.git@abc1234" in page  # the Freight's, timeline
