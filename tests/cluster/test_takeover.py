"""Resume anywhere, on both backends: a Promotion taken over by another replica (its own work
directory) or by a replica whose work directory is gone finishes with one push, one pull
request, one sync and the uninterrupted run's tree.

The scenarios are tests/support/takeover.py's. On the emulator a kill "on a status write" is
exact (its fault hook fires on the request); on the real server it happens as soon as the test
sees the write, a few milliseconds later: still a SIGKILL in the middle of the Promotion, with
the same checks.
"""

from __future__ import annotations

from pathlib import Path

from tests.cluster.support import Cluster, EmulatorCluster
from tests.support.takeover import fresh_work_dir_scenario, takeover_scenario


async def test_a_standby_with_its_own_work_directory_finishes_a_promotion_killed_anywhere(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    emulator = cluster.running if isinstance(cluster, EmulatorCluster) else None
    report = await takeover_scenario(
        tmp_path, cluster.kubeconfig_path, cluster.api_client, emulator=emulator
    )
    print("\n" + "\n".join(report))


async def test_a_replica_whose_work_directory_is_gone_rebuilds_it_and_finishes(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.install_crds()
    emulator = cluster.running if isinstance(cluster, EmulatorCluster) else None
    report = await fresh_work_dir_scenario(
        tmp_path, cluster.kubeconfig_path, cluster.api_client, emulator=emulator
    )
    print("\n" + "\n".join(report))
