"""The one planner every front end shares (promoter.chat.planner), table-driven.

Each rule is decided once; these tables check it with Slack's authorizer (user IDs, user groups,
the server's default promoters) and GitHub's (repository permission, promoter lists naming users
and ``org/team``), with the facts only GitHub has (a pull request's Freight) and those only
buttons carry (Confirm, "Promote to NEXT"). The front ends' own tests go through signed webhooks
and slash commands; these run in microseconds and cover every branch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from handlers.promoters import github_may_act
from promoter.chat.grammar import Command, parse_comment, parse_slash
from promoter.chat.planner import (
    AlreadyApproved,
    AskConfirm,
    Cancelled,
    Decision,
    DoAbort,
    DoApprove,
    DoPromote,
    DoReverify,
    Facts,
    Plan,
    Refusal,
    ShowHelp,
    ShowStatus,
    abort_targets,
    freight_to_approve,
    needs_pr_freight,
    plan,
    stages_to_authorize,
)
from promoter.chat.port import Snapshot
from promoter.chat.views import FreightLabel
from promoter.resources import annotations as ann
from promoter.resources.stages import Approval
from slack.commands import authorizer, needs_confirmation
from tests.support import objects
from tests.support.objects import freight, promotion, stage

NOW = datetime(2024, 6, 1, tzinfo=UTC)
TAUNTAUN = FreightLabel("abc1234def", "frozen-tauntaun")


SNAPSHOT = Snapshot(
    namespace="p",
    stages=[
        stage("test", annotations={}),
        stage(
            "prod",
            verification=["smoke"],
            annotations={ann.SLACK_PROMOTERS: "U1, S0OPS", ann.SLACK_CONFIRM: "true"},
        ),
        stage("uat", upstream=["test"], annotations={ann.SLACK_CONFIRM: "true"}),
    ],
    freight=[
        freight(
            "abc1234def",
            alias="frozen-tauntaun",
            created="2024-01-01T00:00:00Z",
            commits=[{"id": "abc1234def0"}],
        ),
        *(
            freight(
                name, alias=alias, created="2024-01-01T00:00:00Z", commits=[{"id": "1234567abc"}]
            )
            for name, alias in [("0ddba11aaa", "lazy-lemur"), ("0ddba11bbb", "wily-yak")]
        ),
    ],
    promotions=[
        promotion("prod.01", "prod", phase="Succeeded", created="01"),
        promotion("prod.02", "prod", phase="Pending", created="02"),
        promotion("prod.03", "prod", phase="Running", created="03"),
    ],
)


def slack_facts(
    user: str,
    groups: Sequence[str] = (),
    defaults: Sequence[str] = (),
    snapshot: Snapshot = SNAPSHOT,
) -> Facts:
    return Facts(snapshot, authorizer(user, groups, defaults), now=NOW, confirm=needs_confirmation)


def github_facts(
    user: str,
    permission: str = "write",
    teams: Sequence[str] = (),
    pr_freight: str | Refusal | None = None,
    snapshot: Snapshot = SNAPSHOT,
) -> Facts:
    def may_act(stage: Mapping[str, Any] | None) -> Decision:
        return github_may_act(stage or {}, user, permission, teams)

    return Facts(snapshot, may_act, now=NOW, pr_freight=pr_freight)


SLACK_CASES = [
    (
        "frozen-tauntaun to test",
        "U9",
        [],
        [],
        DoPromote("test", "abc1234def", TAUNTAUN),
    ),
    (
        "abc1234 to test",
        "U9",
        [],
        [],
        DoPromote("test", "abc1234def", TAUNTAUN),
    ),
    (
        "latest to prod",
        "U1",
        [],
        [],
        AskConfirm("prod", "abc1234def", TAUNTAUN),
    ),
    (
        "latest to prod",
        "U2",
        ["S0OPS"],
        [],
        AskConfirm("prod", "abc1234def", TAUNTAUN),
    ),
    ("latest to prod", "U2", [], [], Refusal("<@U2> may not act on Stage prod in project p")),
    ("latest to test", "U2", [], ["U1"], Refusal("<@U2> may not act on Stage test in project p")),
    (
        "nope to test",
        "U1",
        [],
        [],
        Refusal("no Freight named, aliased or with a name or commit starting 'nope'"),
    ),
    # A unique prefix of the name finds it, like a git short hash; an ambiguous one lists
    # the candidates, alias first.
    ("abc1 to test", "U9", [], [], DoPromote("test", "abc1234def", TAUNTAUN)),
    (
        "abd to test",
        "U9",
        [],
        [],
        Refusal("no Freight named, aliased or with a name or commit starting 'abd'"),
    ),
    (
        "0ddba11 to test",
        "U9",
        [],
        [],
        Refusal(
            "`0ddba11` is ambiguous: it could be `lazy-lemur (0ddba11aaa)`, "
            "`wily-yak (0ddba11bbb)`; use an alias or a longer prefix"
        ),
    ),
    # Not available to a Stage that asks for confirmation: refused before asking.
    (
        "frozen-tauntaun to uat",
        "U1",
        [],
        [],
        Refusal(
            "Freight `frozen-tauntaun` is not available to Stage `uat` yet (it must come "
            "from a Warehouse the Stage requests directly, be verified in its upstream "
            "Stages and soaked there, if required, or be approved for the Stage: "
            "`/approve frozen-tauntaun for uat`)"
        ),
    ),
    ("latest to nowhere", "U1", [], [], Refusal("there is no Stage `nowhere` in project `p`")),
    ("abort prod", "U1", [], [], DoAbort(("prod.03",), ("prod",))),
    ("abort prod all", "U1", [], [], DoAbort(("prod.03", "prod.02"), ("prod",))),
    ("abort prod.02", "U1", [], [], DoAbort(("prod.02",), ("prod",))),
    (
        "abort prod.01",
        "U1",
        [],
        [],
        Refusal("Promotion `prod.01` already finished (Succeeded); there is nothing to abort"),
    ),
    ("abort prod.02", "U3", [], [], Refusal("<@U3> may not act on Stage prod in project p")),
    (
        "abort test",
        "U1",
        [],
        [],
        Refusal("nothing to abort: no Promotion is running or queued in Stage `test`"),
    ),
    ("abort ghost", "U1", [], [], Refusal("no Promotion or Stage named `ghost` in project `p`")),
    ("verify prod", "U1", [], [], DoReverify("prod")),
    (
        "verify test",
        "U1",
        [],
        [],
        Refusal(
            "Stage `test` has no verification configured (spec.verification): its Freight "
            "counts as verified once a Promotion succeeds and the Stage is healthy"
        ),
    ),
    ("verify prod", "U4", [], [], Refusal("<@U4> may not act on Stage prod in project p")),
    ("help", "U4", [], [], ShowHelp("p", ("test", "uat"), ("prod",), ("test", "uat"))),
    ("help", "U1", [], [], ShowHelp("p", ("prod", "test", "uat"), (), ("prod", "test", "uat"))),
]


@pytest.mark.parametrize(("text", "user", "groups", "defaults", "expected"), SLACK_CASES)
def test_slack_rules(
    text: str, user: str, groups: list[str], defaults: list[str], expected: Plan
) -> None:
    assert plan(parse_slash(text), slack_facts(user, groups, defaults)) == expected


def comment(text: str) -> Command:
    (line,) = parse_comment(text)
    assert line.command is not None, line.error
    return line.command


GITHUB_SNAPSHOT = Snapshot(
    namespace="p",
    stages=[
        stage("test", annotations={}),
        stage(
            "prod", verification=["smoke"], annotations={ann.GITHUB_PROMOTERS: "alice, acme/ops"}
        ),
        stage("uat", upstream=["test"], annotations={}),
    ],
    freight=SNAPSHOT.freight,
    promotions=SNAPSHOT.promotions,
)

NOT_A_PR = Refusal("this is not a pull request: name a Freight. Usage: /promote [FREIGHT] to STAGE")


@pytest.mark.parametrize(
    ("text", "user", "permission", "teams", "pr_freight", "expected"),
    [
        # The same lookups as Slack; GitHub never asks to confirm.
        ("/promote frozen-tauntaun to test", "bob", "write", [], None,
         DoPromote("test", "abc1234def", TAUNTAUN)),
        ("/promote abc1 to test", "bob", "admin", [], None,
         DoPromote("test", "abc1234def", TAUNTAUN)),
        ("/promote frozen-tauntaun to test", "bob", "read", [], None,
         Refusal("@bob needs write access to this repository (has read)")),
        ("/promote frozen-tauntaun to prod", "bob", "write", [], None,
         Refusal("@bob is not listed in Stage prod's longshoreman.dev/github-promoters "
                 "annotation")),
        ("/promote frozen-tauntaun to prod", "bob", "write", ["acme/ops"], None,
         DoPromote("prod", "abc1234def", TAUNTAUN)),
        ("/promote frozen-tauntaun to prod", "Alice", "maintain", [], None,
         DoPromote("prod", "abc1234def", TAUNTAUN)),
        # On a merged pull request, no Freight named means the PR's own.
        ("/promote to test", "bob", "write", [], "abc1234def",
         DoPromote("test", "abc1234def", TAUNTAUN)),
        ("/promote to test", "bob", "write", [], NOT_A_PR, NOT_A_PR),
        # Availability is checked before anything else changes, as on Slack.
        ("/promote frozen-tauntaun to uat", "bob", "write", [], None,
         Refusal("Freight `frozen-tauntaun` is not available to Stage `uat` yet (it must come "
                 "from a Warehouse the Stage requests directly, be verified in its upstream "
                 "Stages and soaked there, if required, or be approved for the Stage: "
                 "`/approve frozen-tauntaun for uat`)")),
        ("/promote frozen-tauntaun to nowhere", "bob", "write", [], None,
         Refusal("there is no Stage `nowhere` in project `p`")),
        # One abort rule: the running Promotion; `all` adds the queue; a finished one is refused.
        ("/abort prod", "alice", "write", [], None, DoAbort(("prod.03",), ("prod",))),
        ("/abort prod all", "alice", "write", [], None,
         DoAbort(("prod.03", "prod.02"), ("prod",))),
        ("/abort prod.01", "alice", "write", [], None,
         Refusal("Promotion `prod.01` already finished (Succeeded); there is nothing to abort")),
        ("/abort prod", "bob", "write", [], None,
         Refusal("@bob is not listed in Stage prod's longshoreman.dev/github-promoters "
                 "annotation")),
        # Without a name, on a pull request: the active Promotions of its Freight.
        ("/abort", "alice", "write", [], "f1", DoAbort(("prod.03", "prod.02"), ("prod",))),
        ("/abort", "alice", "write", [], "abc1234def",
         Refusal("no Promotion of this pull request's Freight is running or queued")),
        ("/verify prod", "alice", "write", [], None, DoReverify("prod")),
        ("/verify test", "alice", "write", [], None,
         Refusal("Stage `test` has no verification configured (spec.verification): its Freight "
                 "counts as verified once a Promotion succeeds and the Stage is healthy")),
        ("/status", "bob", "read", [], None,
         Refusal("@bob needs write access to this repository (has read)")),
        ("/status qa", "bob", "write", [], None, Refusal("there is no Stage `qa` in project `p`")),
        # Help says what is true for the asker, team memberships resolved.
        ("/help", "bob", "write", [], None,
         ShowHelp("p", ("test", "uat"), ("prod",), ("test", "uat"))),
        ("/help", "bob", "write", ["acme/ops"], None,
         ShowHelp("p", ("prod", "test", "uat"), (), ("prod", "test", "uat"))),
        ("/help", "bob", "read", [], None, ShowHelp("p", (), ("prod", "test", "uat"), ())),
    ],
)  # fmt: skip
def test_github_rules(
    text: str,
    user: str,
    permission: str,
    teams: list[str],
    pr_freight: str | Refusal | None,
    expected: Plan,
) -> None:
    facts = github_facts(user, permission, teams, pr_freight, snapshot=GITHUB_SNAPSHOT)
    assert plan(comment(text), facts) == expected


def test_status_rows_show_aliases_and_the_queue() -> None:
    result = plan(parse_slash("status"), slack_facts("U9"))
    assert isinstance(result, ShowStatus)
    assert [r.stage for r in result.rows] == ["prod", "test", "uat"]
    assert result.rows[0].running == "prod.03" and result.rows[0].queued == 1
    empty = Snapshot(namespace="q")
    assert plan(parse_slash("status"), slack_facts("U9", snapshot=empty)) == ShowStatus("q", ())


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # Confirm: decided again, and no second Confirm is asked for.
        (Command("promote", freight="abc1234def", stage="prod", confirmed=True),
         DoPromote("prod", "abc1234def", TAUNTAUN)),
        # "Promote to NEXT": only while the Stage still follows the one the button was drawn in.
        (Command("promote", freight="abc1234def", stage="uat", after="test", confirmed=True),
         Refusal("Freight `frozen-tauntaun` is not available to Stage `uat` yet (it must come "
                 "from a Warehouse the Stage requests directly, be verified in its upstream "
                 "Stages and soaked there, if required, or be approved for the Stage: "
                 "`/approve frozen-tauntaun for uat`)")),
        (Command("promote", freight="abc1234def", stage="prod", after="test"),
         Refusal("Stage `prod` no longer follows `test`")),
        (Command("abort", target="prod.03"), DoAbort(("prod.03",), ("prod",))),
        (Command("verify", stage="prod"), DoReverify("prod")),
        (Command("cancel"), Cancelled()),
    ],
)  # fmt: skip
def test_buttons_are_commands(command: Command, expected: Plan) -> None:
    assert plan(command, slack_facts("U1")) == expected


def test_a_confirm_is_asked_only_where_the_front_end_asks() -> None:
    ask = plan(parse_slash("latest to prod"), slack_facts("U1"))
    assert ask == AskConfirm("prod", "abc1234def", TAUNTAUN)
    github = github_facts("alice", snapshot=SNAPSHOT)
    assert plan(comment("/promote latest to prod"), github) == DoPromote(
        "prod", "abc1234def", TAUNTAUN
    )


def test_only_the_consulted_stages_are_looked_up() -> None:
    names = lambda stages: sorted(s["metadata"]["name"] for s in stages)  # noqa: E731
    assert names(stages_to_authorize(parse_slash("latest to prod"), SNAPSHOT)) == ["prod"]
    assert names(stages_to_authorize(parse_slash("abort prod.02"), SNAPSHOT)) == ["prod"]
    assert names(stages_to_authorize(parse_slash("abort ghost"), SNAPSHOT)) == []
    assert names(stages_to_authorize(parse_slash("status"), SNAPSHOT)) == []
    assert names(stages_to_authorize(parse_slash("help"), SNAPSHOT)) == ["prod", "test", "uat"]
    assert names(stages_to_authorize(comment("/abort"), SNAPSHOT, "f1")) == ["prod"]


def test_which_commands_need_the_pull_requests_freight() -> None:
    assert needs_pr_freight(comment("/promote to test"))
    assert needs_pr_freight(comment("/abort"))
    assert not needs_pr_freight(comment("/promote latest to test"))
    assert not needs_pr_freight(comment("/abort prod"))
    assert not needs_pr_freight(parse_slash("status"))


# ---- Manual Warehouses: Freight made on request -----------------------------------------------


def manual_warehouse(policy: str = "Manual") -> dict[str, Any]:
    return objects.warehouse(
        "w",
        namespace="p",
        freightCreationPolicy=policy,
        subscriptions=[
            {"image": {"repoURL": "ghcr.io/acme/app"}},
            {"git": {"repoURL": "https://github.com/acme/gitops"}},
        ],
        status={
            "discoveredArtifacts": {
                "images": [
                    {
                        "repoURL": "ghcr.io/acme/app",
                        "references": [
                            {"tag": "1.4.2", "digest": "sha256:" + "2" * 64},
                            {"tag": "1.4.1", "digest": "sha256:" + "1" * 64},
                        ],
                    }
                ],
                "git": [
                    {
                        "repoURL": "https://github.com/acme/gitops",
                        "commits": [
                            {"id": "c0ffee" + "0" * 34, "branch": "main", "subject": "newest"},
                            {"id": "beef00" + "0" * 34, "branch": "main", "subject": "older"},
                        ],
                    }
                ],
            }
        },
    )


def with_warehouses(*warehouses: dict[str, Any]) -> Snapshot:
    return Snapshot(
        namespace="p",
        stages=SNAPSHOT.stages,
        freight=SNAPSHOT.freight,
        promotions=SNAPSHOT.promotions,
        warehouses=list(warehouses),
    )


def test_a_manual_warehouse_makes_the_asked_for_freight_with_the_newest_of_the_rest() -> None:
    facts = github_facts("alice", snapshot=with_warehouses(manual_warehouse()))
    decided = plan(parse_slash("ghcr.io/acme/app:1.4.1 to test"), facts)
    assert isinstance(decided, DoPromote) and decided.create is not None
    made = decided.create
    assert made["images"] == [
        {"repoURL": "ghcr.io/acme/app", "tag": "1.4.1", "digest": "sha256:" + "1" * 64}
    ]
    assert [c["id"][:6] for c in made["commits"]] == ["c0ffee"]
    assert decided.freight == made["metadata"]["name"] and made["alias"]
    assert made["origin"] == {"kind": "Warehouse", "name": "w"}
    # The same request makes the same Freight (a Confirm press, a retry, another replica).
    again = plan(parse_slash("ghcr.io/acme/app:1.4.1 to test"), facts)
    assert isinstance(again, DoPromote) and again.freight == decided.freight
    # A commit SHA picks the commit, with the newest image.
    by_commit = plan(parse_slash("beef000 to test"), facts)
    assert isinstance(by_commit, DoPromote) and by_commit.create is not None
    assert by_commit.create["images"][0]["tag"] == "1.4.2"
    assert by_commit.create["commits"][0]["id"].startswith("beef00")


@pytest.mark.parametrize(
    ("warehouse", "command", "reason"),
    [
        # Automatic Warehouses make their own Freight; nothing is made on request.
        (manual_warehouse("Automatic"), "ghcr.io/acme/app:1.4.1 to test", "no Freight holds"),
        # Never discovered.
        (manual_warehouse(), "ghcr.io/acme/app:9.9.9 to test", "no Freight holds"),
        # uat takes Freight from test, not from the Warehouse.
        (manual_warehouse(), "ghcr.io/acme/app:1.4.1 to uat", "no Freight holds"),
    ],
)
def test_freight_is_made_on_request_only_where_a_manual_warehouse_discovered_it(
    warehouse: dict[str, Any], command: str, reason: str
) -> None:
    decided = plan(parse_slash(command), github_facts("alice", snapshot=with_warehouses(warehouse)))
    assert isinstance(decided, Refusal) and reason in decided.reason


# ---- /approve --------------------------------------------------------------------------------

APPROVAL_SNAPSHOT = Snapshot(
    namespace="p",
    stages=[
        stage("test", annotations={}),
        # prod lists approvers apart from its promoters, and forbids self-approval.
        stage(
            "prod",
            upstream=["test"],
            annotations={
                ann.GITHUB_PROMOTERS: "alice",
                ann.GITHUB_APPROVERS: "carol, acme/release",
                ann.SLACK_PROMOTERS: "U1",
                ann.SLACK_APPROVERS: "U3 S0REL",
                ann.SELF_APPROVAL: "false",
            },
        ),
        # uat has no approver list: its promoters (here: any writer) approve.
        stage("uat", upstream=["test"], annotations={}),
        stage("elsewhere", warehouse="other", annotations={}),
    ],
    freight=[
        *SNAPSHOT.freight,
        freight(
            "beef5678aa",
            alias="done-deal",
            created="2024-01-01T00:00:00Z",
            status={"approvedFor": {"uat": {"approvedAt": "2024-02-01T10:00:00Z",
                                            "approvedBy": "github:carol"}}},
        ),
    ],
)  # fmt: skip
TAUNTAUN_ON = "Freight `frozen-tauntaun` carries a change of yours and Stage `prod` does not"
FORBIDS_SELF = (
    f'{TAUNTAUN_ON} allow self-approval (longshoreman.dev/self-approval: "false"): someone '
    "else must approve it"
)
DONE_DEAL = FreightLabel("beef5678aa", "done-deal")


def approving_facts(
    user: str, permission: str = "write", teams: Sequence[str] = (), authored: bool | None = False
) -> Facts:
    def may_act(stage: Mapping[str, Any] | None) -> Decision:
        return github_may_act(stage or {}, user, permission, teams)

    def may_approve(stage: Mapping[str, Any] | None) -> Decision:
        return github_may_act(stage or {}, user, permission, teams, approve=True)

    return Facts(
        APPROVAL_SNAPSHOT,
        may_act,
        now=NOW,
        may_approve=may_approve,
        authored=lambda freight: authored,
    )


@pytest.mark.parametrize(
    ("text", "user", "teams", "authored", "expected"),
    [
        # The approver list decides, not the promoter list; a team counts.
        ("/approve frozen-tauntaun for prod", "carol", [], False,
         DoApprove("prod", "abc1234def", TAUNTAUN)),
        ("/approve abc1234 for prod", "dave", ["acme/release"], False,
         DoApprove("prod", "abc1234def", TAUNTAUN)),
        ("/approve frozen-tauntaun for prod", "alice", [], False,
         Refusal("@alice is not listed in Stage prod's longshoreman.dev/github-approvers "
                 "annotation")),
        # Without an approver list, whoever may promote may approve (Kargo's "promote" verb).
        ("/approve frozen-tauntaun for uat", "bob", [], False,
         DoApprove("uat", "abc1234def", TAUNTAUN)),
        # Self-approval, where forbidden; and where the front end cannot tell, refused too.
        ("/approve frozen-tauntaun for prod", "carol", [], True, Refusal(FORBIDS_SELF)),
        ("/approve frozen-tauntaun for prod", "carol", [], None,
         Refusal("Stage `prod` does not allow self-approval (longshoreman.dev/self-approval: "
                 "\"false\") and I cannot tell whether Freight `frozen-tauntaun` carries a change "
                 "of yours: approve it where I can (a pull request comment), or ask someone "
                 "else")),
        ("/approve frozen-tauntaun for uat", "bob", [], True,
         DoApprove("uat", "abc1234def", TAUNTAUN)),
        # Kargo's refusal: a Stage that does not request the Freight's origin.
        ("/approve frozen-tauntaun for elsewhere", "bob", [], False,
         Refusal("Stage `elsewhere` does not request Freight from origin `Warehouse/w`")),
        # An approval that is there stands; nothing to do.
        ("/approve done-deal for uat", "bob", [], False,
         AlreadyApproved("uat", "beef5678aa", DONE_DEAL,
                         Approval("uat", datetime(2024, 2, 1, 10, tzinfo=UTC), "github:carol"))),
        ("/approve nope for uat", "bob", [], False,
         Refusal("no Freight named, aliased or with a name or commit starting 'nope'")),
        ("/approve frozen-tauntaun for nowhere", "bob", [], False,
         Refusal("there is no Stage `nowhere` in project `p`")),
    ],
)  # fmt: skip
def test_approve_rules(
    text: str, user: str, teams: list[str], authored: bool | None, expected: Plan
) -> None:
    assert plan(comment(text), approving_facts(user, teams=teams, authored=authored)) == expected


def test_approved_freight_is_available_and_promoted_where_it_was_not() -> None:
    facts = approving_facts("alice")
    refused = plan(comment("/promote frozen-tauntaun to prod"), facts)
    assert isinstance(refused, Refusal) and "/approve frozen-tauntaun for prod" in refused.reason
    assert plan(comment("/promote done-deal to uat"), facts) == DoPromote(
        "uat", "beef5678aa", DONE_DEAL
    )


def test_help_tells_where_the_asker_may_approve() -> None:
    carol = plan(comment("/help"), approving_facts("carol"))
    assert isinstance(carol, ShowHelp)
    assert carol.approvable == ("elsewhere", "prod", "test", "uat")
    assert "prod" not in carol.allowed
    alice = plan(comment("/help"), approving_facts("alice"))
    assert isinstance(alice, ShowHelp) and "prod" not in alice.approvable


def test_self_approval_is_looked_up_only_where_it_is_forbidden() -> None:
    assert (
        freight_to_approve(comment("/approve frozen-tauntaun for uat"), APPROVAL_SNAPSHOT) is None
    )
    named = freight_to_approve(comment("/approve abc1234 for prod"), APPROVAL_SNAPSHOT)
    assert named is not None and named["metadata"]["name"] == "abc1234def"
    assert freight_to_approve(comment("/promote abc1234 to prod"), APPROVAL_SNAPSHOT) is None


# ---- /abort: one rule for every front end --------------------------------------------------


def _promo(name: str, stage: str, phase: str, freight: str = "f1") -> dict[str, Any]:
    # Created in the order of the names' last two digits, a second apart.
    created = f"2026-01-01T00:00:{name[-2:]}Z"
    return objects.promotion(name, stage, freight=freight, created=created, phase=phase)


ABORT_SNAPSHOT = Snapshot(
    namespace="p",
    stages=[objects.stage(s) for s in ("test", "prod")],
    promotions=[
        _promo("prod.01", "prod", "Succeeded"),
        _promo("prod.02", "prod", "Pending"),
        _promo("prod.03", "prod", "Running"),
        _promo("prod.04", "prod", "Pending", freight="f2"),
        _promo("test.01", "test", "Pending"),
    ],
)


@pytest.mark.parametrize(
    ("target", "queued", "freight", "expected"),
    [
        ("prod", False, None, ["prod.03"]),  # the running one
        ("prod", True, None, ["prod.03", "prod.02", "prod.04"]),  # and the queue when asked
        ("test", False, None, ["test.01"]),  # nothing running: the oldest queued one
        ("prod.02", False, None, ["prod.02"]),  # a Promotion named: that one
        (
            "prod.01",
            False,
            None,
            "Promotion `prod.01` already finished (Succeeded); there is nothing to abort",
        ),
        ("ghost", False, None, "no Promotion or Stage named `ghost` in project `p`"),
        (None, False, "f1", ["prod.03", "test.01", "prod.02"]),  # a PR's Freight (GitHub)
        (None, False, "f9", "no Promotion of this pull request's Freight is running or queued"),
    ],
)
def test_one_abort_rule_for_every_front_end(
    target: str | None, queued: bool, freight: str | None, expected: list[str] | str
) -> None:
    got = abort_targets(ABORT_SNAPSHOT, target, queued=queued, freight=freight)
    if isinstance(expected, str):
        assert got == Refusal(expected)
    else:
        assert not isinstance(got, Refusal) and [p["metadata"]["name"] for p in got] == expected
