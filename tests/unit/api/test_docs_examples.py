"""Area of concern: the docs/api.md examples work as written (issue 16, item 4) — the `dsx serve`
line starts the server and each curl line succeeds against it: run by curl itself where curl is on
PATH, else as the same request (method, headers, body, curl's form type for a bare -d) by urllib."""

from __future__ import annotations

import os
import re
import shlex
import shutil
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


def _like_curl(line: str, env: dict[str, str], cwd: Path) -> None:
    """The request a curl line makes (-H, -X, -d, -o, -fsS), sent with urllib; raises on an HTTP error."""
    words = shlex.split(line.replace("$DSX_API_TOKENS", env["DSX_API_TOKENS"]))[1:]
    headers: dict[str, str] = {}
    method, body, out, url = "GET", None, None, ""
    while words:
        word = words.pop(0)
        if word == "-H":
            name, _, value = words.pop(0).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-X":
            method = words.pop(0)
        elif word == "-d":
            body = words.pop(0).encode()
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")  # what curl sends
            method = "POST" if method == "GET" else method
        elif word == "-o":
            out = cwd / words.pop(0)
        elif not word.startswith("-"):
            url = word
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=120) as answer:
        content = answer.read()
    if out is not None:
        out.write_bytes(content)


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
            if shutil.which("curl") is None:
                _like_curl(line, env, tmp_path)
                continue
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
