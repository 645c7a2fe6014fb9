"""Issue #28, done when: a restart, or a change of leader, writes nothing that did not change.

The whole server (``create_app``: the controller, the GitHub and Slack front ends, leader
election) runs in this process against the API server emulator, the fake GitHub, the fake Slack
and the fake Argo Rollouts. Signed ``issue_comment`` webhooks promote the Freight of a merged
pull request to three Stages that all announce in one Slack channel: ``test`` (verified, a GitHub
environment) and ``uat`` (verified) finish, with their ``promote:`` and ``verify:`` check runs,
replies, Deployment statuses, live messages and thread replies; ``prod`` (a GitHub environment)
waits at a gate step, Running.

Then the replica stops and a new one starts on the same cluster (or, with two replicas, the
leader stops and the standby takes the Lease over). The new leader replays every Stage and
Promotion to its front ends, with nothing in memory: GitHub and Slack must get no write at all,
for the finished Promotions and their verifications as for the running one. Opening the gate
then moves ``prod`` on, and the new leader shows that as usual, to its end. Over the whole run no
surface is ever written twice in a row with the same content.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app.controller import kube as k
from app.server import ServerState, create_app, wait_started
from app.settings import Settings
from handlers.webhook import WEBHOOK_PATH
from promoter.resources import annotations as ann
from tests.support import objects
from tests.support.controller import Gate, registry_with
from tests.support.fixtures import analysis_template
from tests.support.github import FakeGitHub, running_fake_github, webhook_request
from tests.support.gitrepo import make_remote
from tests.support.kube import RunningApiServer, running_apiserver
from tests.support.rollouts import FakeRolloutsController, KubernetesAnalysisRuns
from tests.support.slack import SIGNING_SECRET, TOKEN, FakeSlack, SlackMessage, running_fake_slack
from tests.support.waiting import eventually

NS = "quiet"
SECRET = "webhook-secret"
REPO = "example/app"
APP_URL = f"https://github.com/{REPO}.git"
FREIGHT = "a" * 40
CHANNEL = "C0DEPLOY"
# The shortest leader election the settings allow: a takeover in about a second.
LEASE = {
    "LONGSHOREMAN_LEASE_DURATION": "1",
    "LONGSHOREMAN_RENEW_DEADLINE": "0.5",
    "LONGSHOREMAN_RETRY_PERIOD": "0.1",
}
SLACK_WRITES = ("chat.postMessage", "chat.update", "chat.postEphemeral", "chat.delete")
STEPS = [{"uses": "compose-output", "as": "out", "config": {"stage": "${{ ctx.stage }}"}}]
HELD = [
    *STEPS,
    {"uses": "gate", "as": "hold", "config": {"name": "prod"}},
    {"uses": "compose-output", "as": "after", "config": {"done": "yes"}},
]


def stage(name: str, steps: list[dict[str, Any]], *, verify: bool, environment: bool) -> Any:
    annotations = {ann.GITHUB_PROMOTERS: "alice", ann.SLACK_CHANNEL: CHANNEL}
    if environment:
        annotations[ann.GITHUB_DEPLOYMENTS] = "true"
    return objects.stage(
        name,
        namespace=NS,
        warehouse="app",
        steps=steps,
        verification=["multiple-job"] if verify else (),
        annotations=annotations,
    )


@dataclass
class Replica:
    name: str
    client: TestClient[Any, Any]
    state: ServerState

    @property
    def leading(self) -> bool:
        return self.state.controller is not None and self.state.controller.leading


@dataclass
class World:
    tmp_path: Path
    server: RunningApiServer
    kube: k.Kube
    github: FakeGitHub
    slack: FakeSlack
    gate: Gate
    sha: str
    pr: int
    replicas: list[Replica] = field(default_factory=list)

    # ---- replicas ------------------------------------------------------------------------------

    async def start(self, name: str, *, leader_election: bool = False) -> Replica:
        """A replica as a pod runs it: its own work directory, the shared cluster and fakes."""
        env = {
            "KUBECONFIG": str(self.server.kubeconfig_path),
            "LONGSHOREMAN_WATCH_NAMESPACE": NS,
            "LONGSHOREMAN_WORK_DIR": str(self.tmp_path / f"work-{name}"),
            "POD_NAME": name,
            "LONGSHOREMAN_MIN_REQUEUE_SECONDS": "0",
            "LONGSHOREMAN_WAREHOUSE_DISCOVERY": "false",
            "LONGSHOREMAN_GITHUB_APP_ID": str(self.github.app_id),
            "LONGSHOREMAN_GITHUB_PRIVATE_KEY": self.github.private_key,
            "LONGSHOREMAN_GITHUB_WEBHOOK_SECRET": SECRET,
            "LONGSHOREMAN_GITHUB_API_URL": self.github.url,
            "LONGSHOREMAN_GITHUB_PROJECT": NS,
            "LONGSHOREMAN_SLACK_BOT_TOKEN": TOKEN,
            "LONGSHOREMAN_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "LONGSHOREMAN_SLACK_API_URL": self.slack.url,
            "LONGSHOREMAN_SLACK_PROJECT": NS,
            "LONGSHOREMAN_SLACK_UPDATE_INTERVAL": "0.05",
        }
        if leader_election:
            env |= {
                "LONGSHOREMAN_LEADER_ELECTION": "true",
                "LONGSHOREMAN_LEASE_NAMESPACE": NS,
                **LEASE,
            }
        app = create_app(Settings.from_env(env), registry=registry_with(gate=self.gate))
        client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        state = await wait_started(client.app)
        assert state.controller is not None
        await asyncio.wait_for(state.controller.wait_synced(), 20)
        replica = Replica(name, client, state)
        self.replicas.append(replica)
        return replica

    async def stop(self, replica: Replica) -> None:
        """A clean shutdown (SIGTERM): the leader releases its Lease on the way out."""
        self.replicas.remove(replica)
        await replica.client.close()

    async def leader(self) -> Replica:
        async def one() -> Replica | None:
            leaders = [r for r in self.replicas if r.leading]
            return leaders[0] if len(leaders) == 1 else None

        return await eventually(one, "one replica to lead")

    async def settled(self, replica: Replica) -> None:
        """Until the replica's front ends have nothing left to do and neither fake heard from
        it for a while (writes to the cluster echo back as watch events, which may queue more)."""
        github, slack = replica.state.github, replica.state.slack
        assert github is not None and slack is not None
        seen: tuple[int, ...] = ()
        for _ in range(200):
            await github.queue.join()
            await slack.idle()
            now = (len(self.github.log), len(self.slack.calls))
            if now == seen:
                return
            seen = now
            await asyncio.sleep(0.3)
        raise AssertionError("the replica's front ends did not settle")

    # ---- GitHub --------------------------------------------------------------------------------

    async def promote(self, replica: Replica, target: str) -> str:
        """``/promote to TARGET`` on the merged pull request; the Promotion's name."""
        comment = self.github.add_comment(REPO, self.pr, f"/promote to {target}")
        headers, body = webhook_request(
            "issue_comment", self.github.comment_payload(REPO, comment), SECRET
        )
        response = await replica.client.post(WEBHOOK_PATH, data=body, headers=headers)
        assert response.status == 202, await response.text()

        async def made() -> str | None:
            items, _ = await self.kube.list(k.PROMOTIONS, NS)
            names = [str(p["metadata"]["name"]) for p in items if p["spec"]["stage"] == target]
            return names[0] if names else None

        return await eventually(made, f"the Promotion to {target}")

    def run(self, name: str) -> dict[str, Any] | None:
        runs = [r for r in self.github.check_runs(REPO, self.sha) if r["name"] == name]
        assert len(runs) <= 1, runs
        return runs[0] if runs else None

    def reply(self, promotion: str) -> str:
        """The body of the bot's reply to the command that made ``promotion``."""
        replies = [
            c["body"]
            for c in self.github.comments(REPO, self.pr)
            if c["user"]["type"] == "Bot" and f"`{promotion}`" in c["body"]
        ]
        return replies[0] if replies else ""

    def deployment_state(self, environment: str) -> str:
        found = self.github.deployments(REPO, environment)
        return self.github.states(found[0])[-1] if len(found) == 1 else ""

    def github_writes(self, since: int) -> list[tuple[str, str, Any]]:
        return [
            (r.method, r.path, r.body)
            for r in self.github.log[since:]
            if r.method != "GET" and r.path.startswith("/repos/")
        ]

    def repeated_github_writes(self) -> list[tuple[str, Any]]:
        """Writes that showed what the same thing already showed (a check run, a comment, a
        Deployment's statuses): the previous write to the same path had the same body."""
        last: dict[str, Any] = {}
        out = []
        for method, path, body in self.github_writes(0):
            if method == "PATCH" or path.endswith("/statuses"):
                if path in last and last[path] == body:
                    out.append((path, body))
                last[path] = body
        return out

    # ---- Slack ---------------------------------------------------------------------------------

    def message(self, promotion: str) -> SlackMessage | None:
        for message in self.slack.channel(CHANNEL):
            payload = (message.metadata or {}).get("event_payload") or {}
            if payload.get("promotion") == promotion:
                return message
        return None

    def slack_writes(self, since: int) -> list[tuple[str, Mapping[str, Any]]]:
        return [(c.method, c.args) for c in self.slack.calls[since:] if c.method in SLACK_WRITES]

    def repeated_slack_updates(self) -> list[str]:
        """Messages updated to what they already showed."""
        return [
            m.ts
            for m in self.slack.messages
            for before, after in zip(m.versions, m.versions[1:], strict=False)
            if before == after
        ]

    # ---- the scenario --------------------------------------------------------------------------

    async def promote_all(self, replica: Replica) -> dict[str, str]:
        """Promote to test, uat and prod; wait until test and uat are verified and shown so,
        and prod shows that it waits at its gate. Promotion names by Stage."""
        names = {target: await self.promote(replica, target) for target in ("test", "uat")}
        names["prod"] = await self.promote(replica, "prod")

        async def shown() -> bool | None:
            for target in ("test", "uat"):
                promote, verify = self.run(f"promote: {target}"), self.run(f"verify: {target}")
                message = self.message(names[target])
                if not (
                    promote
                    and promote.get("conclusion") == "success"
                    and verify
                    and verify.get("conclusion") == "success"
                    and "**Succeeded**" in self.reply(names[target])
                    and message
                    and "verification passed" in message.text
                    and self.slack.replies(message.ts)
                ):
                    return None
            held, message = self.run("promote: prod"), self.message(names["prod"])
            if not (
                held
                and held["status"] == "in_progress"
                and "`hold`" in held["output"]["summary"]
                and "`hold`" in self.reply(names["prod"])
                and message
                and "Running" in message.text
                and self.deployment_state("test") == "success"
                and self.deployment_state("prod") == "in_progress"
            ):
                return None
            return True

        await eventually(shown, "test and uat verified and prod held, on GitHub and Slack", 60)
        await self.settled(replica)
        return names

    async def moves_on(self, replica: Replica, names: Mapping[str, str]) -> None:
        """Open prod's gate: the new leader shows prod to its end, as usual."""
        github_mark, slack_mark = len(self.github.log), len(self.slack.calls)
        before = self.message(names["prod"])
        assert before is not None
        self.gate.open("prod")

        async def shown() -> bool | None:
            held, message = self.run("promote: prod"), self.message(names["prod"])
            done = (
                held is not None
                and held.get("conclusion") == "success"
                and "**Succeeded**" in self.reply(names["prod"])
                and message is not None
                and "Succeeded" in message.text
                and self.deployment_state("prod") == "success"
            )
            return True if done else None

        await eventually(shown, "prod to show Succeeded on GitHub and Slack", 60)
        await self.settled(replica)
        # The same message, updated; the same check run and reply, edited.
        assert [m.ts for m in self.slack.channel(CHANNEL)].count(before.ts) == 1
        assert len([m for m in self.slack.channel(CHANNEL) if m.metadata]) == 3
        updated = {args.get("ts") for method, args in self.slack_writes(slack_mark)}
        assert before.ts in updated
        writes = {(method, path) for method, path, _ in self.github_writes(github_mark)}
        held = self.run("promote: prod")
        assert held is not None and ("PATCH", f"/repos/{REPO}/check-runs/{held['id']}") in writes
        assert any(m == "PATCH" and "/issues/comments/" in p for m, p in writes)
        assert any(m == "POST" and p.endswith("/statuses") for m, p in writes)
        assert self.repeated_github_writes() == []
        assert self.repeated_slack_updates() == []


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(running_apiserver(namespaces=[NS]))
        github = await stack.enter_async_context(running_fake_github())
        slack = await stack.enter_async_context(running_fake_slack())
        kube = k.Kube(server.api_client())
        template = analysis_template("multiple-job")
        template["metadata"]["namespace"] = NS
        await kube.create(k.ANALYSIS_TEMPLATES, template)

        # A merged pull request whose merge commit is the Freight's.
        git = make_remote(tmp_path, {"main.go": "package main\n"}, name="app")
        github.add_repo(REPO, git)
        github.set_permission(REPO, "alice", "write")
        main = git.head("main")
        assert main is not None
        git.git("update-ref", "refs/heads/feature", main)
        git.commit_files("feature", {"main.go": "package main // v2\n"}, "Feature")
        pull = await github.open_pull(REPO, "feature", "main")
        merged = await github.merge(REPO, pull["number"])
        sha = str(merged["merge_commit_sha"])
        commit = {"repoURL": APP_URL, "id": sha, "branch": "main"}
        await kube.create(
            k.FREIGHT,
            objects.freight(
                FREIGHT, namespace=NS, alias="frozen-tauntaun", warehouse="app", commits=[commit]
            ),
        )
        await kube.create(k.STAGES, stage("test", STEPS, verify=True, environment=True))
        await kube.create(k.STAGES, stage("uat", STEPS, verify=True, environment=False))
        await kube.create(k.STAGES, stage("prod", HELD, verify=False, environment=True))
        rollouts = FakeRolloutsController(KubernetesAnalysisRuns(server.api_client()))
        await stack.enter_async_context(rollouts.running())

        world = World(tmp_path, server, kube, github, slack, Gate(), sha, int(pull["number"]))
        try:
            yield world
        finally:
            for replica in list(world.replicas):
                await world.stop(replica)
            assert github.contract_problems == []


async def test_a_restart_writes_nothing_that_did_not_change(world: World) -> None:
    first = await world.start("longshoreman-0")
    names = await world.promote_all(first)
    github_mark, slack_mark = len(world.github.log), len(world.slack.calls)

    # SIGTERM, and the Deployment starts the pod again: nothing in memory, the same cluster.
    await world.stop(first)
    restarted = await world.start("longshoreman-1")
    assert await world.leader() is restarted
    await world.settled(restarted)
    assert world.github_writes(github_mark) == []
    assert world.slack_writes(slack_mark) == []

    await world.moves_on(restarted, names)


async def test_a_new_leader_writes_nothing_that_did_not_change(world: World) -> None:
    first = await world.start("longshoreman-a", leader_election=True)
    assert await world.leader() is first
    standby = await world.start("longshoreman-b", leader_election=True)
    names = await world.promote_all(first)
    assert not standby.leading
    github_mark, slack_mark = len(world.github.log), len(world.slack.calls)

    # The leader goes (a rollout of the Deployment): the standby takes the Lease over.
    await world.stop(first)
    assert await world.leader() is standby
    await world.settled(standby)
    assert world.github_writes(github_mark) == []
    assert world.slack_writes(slack_mark) == []

    await world.moves_on(standby, names)
