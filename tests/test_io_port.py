"""BlockingIo runs a child process to its end, whichever way it starts it.

The local runner's port starts children with ``os.posix_spawn`` when one thread runs (the
command line) and with :mod:`subprocess` when others do (the parent changes its directory for a
spawn, which only one thread may do). Both keep the contract the steps rely on: output and exit
code, input, the child's directory and environment, a session of its own, and nothing left
running after a timeout. Every test runs both ways: as it is, and with a second thread alive.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from promoter.io_port import BlockingIo, ProcessResult, drive

PY = sys.executable


@pytest.fixture(params=["one thread", "another thread running"])
def io(request: pytest.FixtureRequest) -> Iterator[BlockingIo]:
    stop = threading.Event()
    other = None
    if request.param == "another thread running":
        other = threading.Thread(target=stop.wait, daemon=True)
        other.start()
    elif threading.active_count() != 1:
        pytest.fail(f"threads left running by earlier tests: {threading.enumerate()}")
    yield BlockingIo()
    stop.set()
    if other is not None:
        other.join()


def run(
    io: BlockingIo,
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    time_limit: float = 60.0,
) -> ProcessResult:
    return drive(io.run_process(args, cwd=cwd, env=env, stdin=stdin, time_limit=time_limit))


def test_output_exit_code_and_directory(io: BlockingIo, tmp_path: Path) -> None:
    here = os.getcwd()
    script = "import os, sys; print(os.getcwd()); print('oops', file=sys.stderr); sys.exit(3)"
    done = run(io, PY, "-c", script, cwd=tmp_path)
    assert done == ProcessResult(3, f"{tmp_path}\n".encode(), b"oops\n")
    assert os.getcwd() == here  # the parent is back where it was


def test_large_output_on_both_streams_and_large_input(io: BlockingIo, tmp_path: Path) -> None:
    # More than a pipe holds, on every stream at once: nothing waits on anything.
    script = (
        "import sys\n"
        "data = sys.stdin.buffer.read()\n"
        "sys.stdout.buffer.write(data)\n"
        "sys.stderr.buffer.write(data[::-1])\n"
    )
    data = bytes(range(256)) * 2000  # 512 KB
    done = run(io, PY, "-c", script, cwd=tmp_path, stdin=data)
    assert (done.returncode, done.stdout, done.stderr) == (0, data, data[::-1])


def test_no_input_reads_as_empty_and_unread_input_is_no_error(
    io: BlockingIo, tmp_path: Path
) -> None:
    read = "import sys; print(len(sys.stdin.buffer.read()))"
    assert run(io, PY, "-c", read, cwd=tmp_path).stdout == b"0\n"
    assert run(io, PY, "-c", read, cwd=tmp_path, stdin=b"").stdout == b"0\n"
    # A child that exits without reading a large input.
    done = run(io, PY, "-c", "pass", cwd=tmp_path, stdin=b"x" * 1_000_000)
    assert done.returncode == 0


def test_the_program_is_found_on_the_childs_path_and_gets_its_environment(
    io: BlockingIo, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tool"
    tool.write_text(f"#!{PY}\nimport os\nprint(os.environ['GREETING'])\n")
    tool.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'missing'}:{bin_dir}", "GREETING": "hello"}
    assert run(io, "tool", cwd=tmp_path, env=env).stdout == b"hello\n"
    with pytest.raises(OSError):
        run(io, "no-such-program-anywhere", cwd=tmp_path, env=env)


def test_a_missing_directory_is_an_os_error(io: BlockingIo, tmp_path: Path) -> None:
    here = os.getcwd()
    with pytest.raises(OSError):
        run(io, PY, "-c", "pass", cwd=tmp_path / "gone")
    assert os.getcwd() == here


def test_the_child_leads_a_session_of_its_own(io: BlockingIo, tmp_path: Path) -> None:
    ours = os.getsid(0)
    script = f"import os; print(os.getsid(0) == os.getpid(), os.getsid(0) != {ours})"
    assert run(io, PY, "-c", script, cwd=tmp_path).stdout == b"True True\n"


def test_a_child_killed_by_a_signal_has_a_negative_code(io: BlockingIo, tmp_path: Path) -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    done = run(io, PY, "-c", script, cwd=tmp_path)
    assert done.returncode == -15


def test_a_timeout_kills_the_child_and_what_it_started(io: BlockingIo, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        run(io, PY, "-c", script, cwd=tmp_path, time_limit=3.0)
    assert time.monotonic() - started < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


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
