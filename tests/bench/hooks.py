"""Goal 13's parts: webhook receivers on loopback (one may never answer) and a Celery worker
on the notify queue."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.bench import config

# A receiver: an HTTP/1.1 server keeping connections open, as any production receiver does,
# answering 204 to each POST at once, or (hang) never. It stands for another machine: a
# process of its own, light (asyncio, no thread per connection), at the lowest CPU priority,
# so it takes no CPU the portal's processes want (they would have these CPUs to themselves).
RECEIVER = r"""
import asyncio, os, sys
os.nice(19)
hang = sys.argv[1] == "hang"

async def answer(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            if hang:
                await asyncio.Event().wait()
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


class Receiver:
    """A receiver process on a free loopback port (`url`)."""

    def __init__(self, *, hang: bool = False) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", RECEIVER, "hang" if hang else "answer"],
            stdout=subprocess.PIPE,
            text=True,
        )
        port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{port}/hooks"

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


class Worker:
    """`celery worker` on the notify queue, as production runs it (prefork, a child per CPU)."""

    def __init__(self, *, env: dict, log: Path) -> None:
        command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=prefork"]
        command += ["--queues=notify", "--without-gossip", "--without-mingle"]
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                [*command, "-l", "INFO"], cwd=config.ROOT, env=env, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the worker says it is ready (its pool started, Django imported)."""
        deadline = time.monotonic() + timeout
        while " ready." not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the notify worker did not start: see {self.log}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
