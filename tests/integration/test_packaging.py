"""``pip install .`` alone (no extras) gives a working ``olp``: the runtime dependencies in
``pyproject.toml`` are complete. Builds the wheel, installs it into a fresh virtualenv from the
package index, runs ``olp --help`` and ``olp start`` to a 200 on ``/health``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import httpx
import trio
from olp_harness import REPO


async def test_the_wheel_alone_starts_a_working_proxy(tmp_path: Path) -> None:
    def build_and_install() -> Path:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(REPO)],
                       check=True, capture_output=True, timeout=300)
        [wheel] = (tmp_path / "dist").glob("olp-*.whl")
        venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
        bin_dir = tmp_path / "venv" / "bin"
        subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", str(wheel)],
                       check=True, capture_output=True, timeout=300)
        return bin_dir

    with trio.fail_after(600):
        bin_dir = await trio.to_thread.run_sync(build_and_install)
        done = await trio.run_process([str(bin_dir / "olp"), "--help"], capture_stdout=True)
        assert b"start" in done.stdout
        home = tmp_path / "olp-home"
        home.mkdir()
        (home / "config.json").write_text(json.dumps({"providers": {"enabled": {
            "anthropic": False, "openai": False, "mistral": False}}}))
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "OLP_HOME": str(home),
               "OLP_PORT": "0", "OLP_OWNER_TOKEN": "olp_packaging_owner_token_0123456789abc"}
        async with trio.open_nursery() as nursery:
            proc = await trio.lowlevel.open_process(
                [str(bin_dir / "olp"), "start"], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE)
            try:
                url = await _listening_url(proc)
                response = await trio.to_thread.run_sync(
                    lambda: httpx.get(f"{url}/health", timeout=10, headers={
                        "Authorization": f"Bearer {env['OLP_OWNER_TOKEN']}"}))
                assert response.status_code == 200
            finally:
                proc.terminate()
                await proc.wait()
                nursery.cancel_scope.cancel()


async def _listening_url(proc: trio.Process) -> str:
    assert proc.stderr is not None
    buf, seen = b"", []
    async for chunk in proc.stderr:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            seen.append(line.decode(errors="replace"))
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a traceback: shown below if the proxy never listens
            if entry.get("msg") == "listening":
                return str(entry["urls"][0]).replace("0.0.0.0", "127.0.0.1")
    raise AssertionError("olp start exited before listening:\n" + "\n".join(seen))
