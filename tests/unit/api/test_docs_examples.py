"""Area of concern: the docs/api.md examples work as written (issue 16, item 4) — the `dsx serve`
line starts the server and each curl line, run by curl itself, succeeds against it."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "api.md"
TOKEN = "docs-example-token-0123456789"


def _commands() -> list[str]:
    """The first bash block of docs/api.md, continuation lines joined."""
    block = re.search(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    return [line.strip() for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_curl_examples_work_as_written(tmp_path: Path) -> None:
    commands = _commands()
    serve = [c for c in commands if c.startswith("dsx serve")]
    curls = [c for c in commands if c.startswith("curl")]
    assert len(serve) == 1 and len(curls) >= 3
    port = _free_port()
    args = shlex.split(serve[0].removesuffix("&").replace("--port 8080", f"--port {port}"))[1:]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DSX_API_TOKENS": TOKEN}
    server = subprocess.Popen(
        [sys.executable, "-m", "dsx", *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                    assert answer.status == 200
                break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "dsx serve did not get ready in 60 s"
                time.sleep(0.3)
        for command in curls:
            line = command.replace(":8080/", f":{port}/")
            done = subprocess.run(
                ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
            )
            assert done.returncode == 0, (command, done.stdout[-500:], done.stderr[-500:])
        with zipfile.ZipFile(tmp_path / "bundle.zip") as bundle:
            assert any(name.endswith("checksums.txt") for name in bundle.namelist())
        assert (tmp_path / "events.db").is_file()
    finally:
        server.terminate()
        server.wait(timeout=30)
