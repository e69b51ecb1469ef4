"""HybridMR's estimation error (Algorithm 1) on real MapReduce jobs (``docs/evaluation.md``).

Starts the mini cluster with the JobHistory server, runs WordCount over 3, 6, 9, 12, 6 and 9 MB
of generated text (``profile:wc``) and SleepJob four times (``profile:nap``), one after the other,
lets the sidecar's poller and history collector store them in a temporary SQLite database, and
prints each signature's runs and the error of estimating each run from the runs before it.

    .venv/bin/python benchmarks/eval_hybridmr.py [--port 18088]

Takes about 5 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.db import history_repo, repo
from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory
from app.policies.hybridmr.profiles import ProfileBook
from app.services.history import HistoryCollector
from app.services.poller import Poller
from app.yarn.client import RMClient
from app.yarn.jobhistory import JobHistoryClient

RUN = Path(__file__).resolve().parents[1] / "hadoop-docker" / "minicluster" / "run"
WORDS = ("alpha", "beta", "gamma", "delta", "yarn", "hadoop", "queue", "deadline")
SIZES_MB = (3, 6, 9, 12, 6, 9)
SLEEPS = 4


def _start(port: int, work: Path) -> subprocess.Popen[bytes]:
    out = (work / "run.stdout").open("wb")
    proc = subprocess.Popen(
        [str(RUN), "--port", str(port), "--workdir", str(work / "cluster"), "--nodemanagers", "2",
         "--node-labels", ",fast", "--jobhistory"],
        stdout=out, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while "READY " not in (work / "run.stdout").read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("the mini cluster did not start")
        time.sleep(0.5)
    return proc


def _job(details: dict[str, str], main: str, args: list[str]) -> None:
    cmd = [f"{details['java_home']}/bin/java", *shlex.split(details["am_java_opts"]), "-cp",
           details["am_classpath"], main, *args]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _collect(rm_url: str, jhs_url: str, db_url: str, jobs: int) -> ProfileBook:
    sessions = make_session_factory(make_engine(db_url))
    async with RMClient([rm_url]) as rm, JobHistoryClient(jhs_url) as jhs:
        poller = Poller(rm, sessions, cluster_name="eval", rm_urls=(rm_url,), interval_s=10)
        collector = HistoryCollector(jhs, sessions, cluster_name="eval", interval_s=10)
        for _ in range(30):
            await poller.poll(int(time.time() * 1000))
            await collector.run_once(int(time.time() * 1000))
            if collector.stored >= jobs:
                break
            await asyncio.sleep(2)
    with sessions() as session:
        cluster = repo.get_cluster(session, "eval")
        assert cluster is not None
        return ProfileBook(history_repo.runs(session, cluster.id, limit=1000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18088)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eval-hybridmr-") as tmp:
        work = Path(tmp)
        proc = _start(args.port, work)
        try:
            details = json.loads((work / "cluster" / "cluster.json").read_text())
            rnd = random.Random(7)
            for k, mb in enumerate(SIZES_MB):
                text = work / f"in{k}" / "words.txt"
                text.parent.mkdir()
                lines = 40_000 * mb // 3
                text.write_text(
                    "\n".join(" ".join(rnd.choice(WORDS) for _ in range(12)) for _ in range(lines))
                )
                _job(details, "org.apache.hadoop.examples.WordCount",
                     ["-Dmapreduce.job.tags=profile:wc",
                      "-Dmapreduce.input.fileinputformat.split.maxsize=1000000",
                      str(text.parent), str(work / f"out{k}")])  # fmt: skip
                print(f"wordcount {mb} MB done", flush=True)
            for k in range(SLEEPS):
                _job(details, "org.apache.hadoop.mapreduce.SleepJob",
                     ["-Dmapreduce.job.tags=profile:nap", "-m", "2", "-r", "1", "-mt", "4000",
                      "-rt", "1000"])  # fmt: skip
                print(f"sleep job {k + 1} done", flush=True)
            db_url = f"sqlite:///{work}/eval.db"
            upgrade(db_url)
            jobs = len(SIZES_MB) + SLEEPS
            book = asyncio.run(_collect(details["rm_url"], details["jobhistory_url"], db_url, jobs))
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    print("\nsignature  runs  estimated  mean_error  p90_error")
    for sig in book.signatures():
        err = book.errors(sig)
        mean = f"{err.mean:.3f}" if err.mean is not None else "-"
        p90 = f"{err.p90:.3f}" if err.p90 is not None else "-"
        print(f"{sig:10s} {len(book.of(sig)):5d} {err.samples:10d} {mean:>11s} {p90:>10s}")
        for run in book.of(sig):
            print(
                f"    {run.app_id}  input {int(run.input_bytes):>9d} B  total {run.total_s:7.2f}"
                f" s  map {run.map_s:6.2f} s  reduce {run.reduce_s:6.2f} s"
            )


if __name__ == "__main__":
    main()
