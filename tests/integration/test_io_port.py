"""LoopIo runs a child process to its end: the contract every step relies on.

Output and exit code, input, the child's directory and environment, a session of its own, and
nothing left running after a timeout (git's remote helpers hold pipes open).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from promoter.ports.io_port import LoopIo, ProcessResult

PY = sys.executable


@pytest.fixture
def io() -> LoopIo:
    return LoopIo()


async def run(
    io: LoopIo,
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    time_limit: float = 60.0,
) -> ProcessResult:
    return await io.run_process(args, cwd=cwd, env=env, stdin=stdin, time_limit=time_limit)


async def test_output_exit_code_and_directory(io: LoopIo, tmp_path: Path) -> None:
    here = os.getcwd()
    script = "import os, sys; print(os.getcwd()); print('oops', file=sys.stderr); sys.exit(3)"
    done = await run(io, PY, "-c", script, cwd=tmp_path)
    assert done == ProcessResult(3, f"{tmp_path}\n".encode(), b"oops\n")
    assert os.getcwd() == here


async def test_large_output_on_both_streams_and_large_input(io: LoopIo, tmp_path: Path) -> None:
    # More than a pipe holds, on every stream at once: nothing waits on anything.
    script = (
        "import sys\n"
        "data = sys.stdin.buffer.read()\n"
        "sys.stdout.buffer.write(data)\n"
        "sys.stderr.buffer.write(data[::-1])\n"
    )
    data = bytes(range(256)) * 2000  # 512 KB
    done = await run(io, PY, "-c", script, cwd=tmp_path, stdin=data)
    assert (done.returncode, done.stdout, done.stderr) == (0, data, data[::-1])


async def test_no_input_reads_as_empty_and_unread_input_is_no_error(
    io: LoopIo, tmp_path: Path
) -> None:
    read = "import sys; print(len(sys.stdin.buffer.read()))"
    assert (await run(io, PY, "-c", read, cwd=tmp_path)).stdout == b"0\n"
    assert (await run(io, PY, "-c", read, cwd=tmp_path, stdin=b"")).stdout == b"0\n"
    # A child that exits without reading a large input.
    done = await run(io, PY, "-c", "pass", cwd=tmp_path, stdin=b"x" * 1_000_000)
    assert done.returncode == 0


async def test_the_program_is_found_on_the_childs_path_and_gets_its_environment(
    io: LoopIo, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tool"
    tool.write_text(f"#!{PY}\nimport os\nprint(os.environ['GREETING'])\n")
    tool.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'missing'}:{bin_dir}", "GREETING": "hello"}
    assert (await run(io, "tool", cwd=tmp_path, env=env)).stdout == b"hello\n"
    with pytest.raises(OSError):
        await run(io, "no-such-program-anywhere", cwd=tmp_path, env=env)


async def test_a_missing_directory_is_an_os_error(io: LoopIo, tmp_path: Path) -> None:
    here = os.getcwd()
    with pytest.raises(OSError):
        await run(io, PY, "-c", "pass", cwd=tmp_path / "gone")
    assert os.getcwd() == here


async def test_the_child_leads_a_session_of_its_own(io: LoopIo, tmp_path: Path) -> None:
    ours = os.getsid(0)
    script = f"import os; print(os.getsid(0) == os.getpid(), os.getsid(0) != {ours})"
    assert (await run(io, PY, "-c", script, cwd=tmp_path)).stdout == b"True True\n"


async def test_a_child_killed_by_a_signal_has_a_negative_code(io: LoopIo, tmp_path: Path) -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    done = await run(io, PY, "-c", script, cwd=tmp_path)
    assert done.returncode == -15


async def test_a_timeout_kills_the_child_and_what_it_started(io: LoopIo, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await run(io, PY, "-c", script, cwd=tmp_path, time_limit=3.0)
    assert time.monotonic() - started < 30
    assert _gone_within(int(pid_file.read_text()), seconds=10)


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waiting for init to reap it is dead too.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
