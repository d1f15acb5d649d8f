"""A Spark standalone cluster on 127.0.0.1: one master and its workers, started from the pyspark
package's own launcher (`bin/spark-class`, which runs the Master and Worker classes from the jars the
package ships) and stopped afterwards, whatever happened, with every executor they started."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 180.0
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = re.compile("Successfully registered with master")


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def wait_for(self, pattern: re.Pattern[str], deadline: float) -> re.Match[str]:
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            found = pattern.search(text)
            if found is not None:
                return found
            if self.process.poll() is not None:
                raise RuntimeError(f"spark {self.name} exited ({self.process.returncode}):\n{self.tail()}")
            time.sleep(0.2)
        raise TimeoutError(f"spark {self.name} did not start in {START_TIMEOUT_S:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        # Each daemon leads a process group of its own, which its executors join: one signal stops all.
        for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
                return


# Every JVM of the cluster and its applications lives for minutes over a small input: compiling hot code
# at the top tier (C2) costs more CPU than it saves then, and this machine's two cores are shared. With
# C1 alone the cluster test took 148 s against 233 on a quiet machine.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1"


def daemon_environment(work: Path) -> dict[str, str]:
    conf = work / "conf"  # empty: no spark-defaults.conf or log settings from the host
    conf.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_DAEMON_MEMORY": "256m",
        "JAVA_TOOL_OPTIONS": SHORT_LIVED_JVM,  # the executors inherit it from their worker
        # The REST submission server would listen on a fixed port (6066).
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }


def _start(name: str, args: list[str], env: dict[str, str], work: Path) -> _Daemon:
    log = work / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=work,
            start_new_session=True,
        )
    return _Daemon(name, process, log)


@contextlib.contextmanager
def standalone_cluster(
    work: Path, workers: int = 2, worker_cores: int = 1, worker_memory: str = "768m"
) -> Iterator[str]:
    """Start a master and `workers` workers; yield the master's URL; stop them all."""
    work.mkdir(parents=True, exist_ok=True)
    env = daemon_environment(work)
    daemons: list[_Daemon] = []
    try:
        master = _start(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", "0", "--webui-port", "0"],
            env,
            work,
        )
        daemons.append(master)
        deadline = time.monotonic() + START_TIMEOUT_S
        url = master.wait_for(_MASTER_URL, deadline).group(1)
        for n in range(workers):
            worker_dir = work / f"worker-{n}"
            worker_dir.mkdir(exist_ok=True)
            daemons.append(
                _start(
                    f"worker-{n}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        *("--host", LOOPBACK, "--port", "0", "--webui-port", "0"),
                        *("--cores", str(worker_cores), "--memory", worker_memory),
                        *("--work-dir", str(worker_dir)),
                        url,
                    ],
                    env,
                    work,
                )
            )
        for daemon in daemons[1:]:
            daemon.wait_for(_REGISTERED, deadline)
        yield url
    finally:
        for daemon in reversed(daemons):
            daemon.stop()
