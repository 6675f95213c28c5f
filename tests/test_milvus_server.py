"""The Milvus first stage through a real Milvus server (the ``milvus`` package's standalone 2.3.5, started
on loopback by this test and stopped after it): the same client a cluster would take, by URI.

The server package is part of the ``test`` extra, so its absence fails the test; a server that is there
but cannot start here skips it with the reason (and the log's tail). Milvus 2.3.5's embedded etcd
always listens on 127.0.0.1:2379 and 2380 (no option moves them), so one such server runs on a machine
at a time: the test checks those ports first, and its teardown ends every process started from its
own data folder (the server binary outlives its Python wrapper's process group)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from momentsearch.search.first_stage import ExactFirstStage, build_first_stage
from momentsearch.search.stages import Queries
from test_first_stage import _index, _queries, _retriever

PORT_FLAGS = ("--proxy-port", "--etcd-port", "--root-coord-port", "--proxy-internal-port", "--query-coord-port",
              "--query-node-port", "--index-coord-port", "--index-node-port", "--data-coord-port", "--data-node-port")


ETCD_PORTS = (2379, 2380)


def _taken(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds: TIME_WAIT does not count
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _stop(proc: subprocess.Popen, data: Path) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    subprocess.run(["pkill", "-9", "-f", str(data / "bin" / "milvus")], check=False)  # the binary it started
    for _ in range(50):
        if not any(_taken(p) for p in ETCD_PORTS):
            break
        time.sleep(0.2)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="module")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory):
    exe = Path(sys.executable).parent / "milvus-server"
    if not exe.is_file():
        pytest.fail("the Milvus server package is missing: pip install 'milvus==2.3.5' (the test extra brings it)")
    busy = [p for p in ETCD_PORTS if _taken(p)]
    if busy:
        pytest.skip(f"a Milvus server cannot start here: 127.0.0.1:{busy[0]} (the fixed port of Milvus 2.3.5's "
                    "embedded etcd) is taken by another process (`ss -ltnp | grep :23`)")
    data = tmp_path_factory.mktemp("milvus")
    ports = dict(zip(PORT_FLAGS, _free_ports(len(PORT_FLAGS)), strict=True))
    log = open(data / "server.log", "wb")  # noqa: SIM115 - closed in the teardown
    proc = subprocess.Popen([str(exe), "--data", str(data), *(x for kv in ports.items() for x in map(str, kv))],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{ports['--proxy-port']}"
    from pymilvus import MilvusClient

    ready, deadline = False, time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            client = MilvusClient(uri, timeout=5)
            client.list_collections()
            client.close()
            ready = True
            break
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(1)
    try:
        if not ready:
            tail = (data / "server.log").read_bytes()[-1500:].decode(errors="replace")
            for f in (data / "logs").glob("milvus-std*.log"):
                tail += "\n" + f.read_bytes()[-1500:].decode(errors="replace")
            print(f"\nthe Milvus server did not start (exit {proc.poll()}):\n{tail}")
            pytest.skip(f"a Milvus server could not start here (exit code {proc.poll()}); see the printed log")
        yield uri
    finally:
        _stop(proc, data)
        log.close()


@pytest.mark.slow
@pytest.mark.parametrize("cosine", [True, False])
def test_a_milvus_server_gives_the_exact_top_100(milvus_uri: str, tmp_path: Path, cosine: bool):
    index = _index(n_videos=300)
    retr = _retriever(index, cosine)
    tokens, mask = _queries()
    ref_s, ref_v = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 100)
    stage = build_first_stage(retr, index, f"milvus:{milvus_uri}", tmp_path, {"index_type": "FLAT"}, family="test")
    s, v = stage.retrieve(Queries(tokens, mask), 100)
    assert np.array_equal(v, ref_v)
    np.testing.assert_allclose(s.numpy(), ref_s.numpy(), rtol=1e-5, atol=1e-5)
    assert stage.stats["uncertified"] == 0
    assert not (tmp_path / "milvus.db").exists()  # the server keeps the vectors, not the index folder
    names = {b.collection for b in stage.backends}
    stage.close()
    # a second searcher finds the collections the first built on the server (keyed by the rows) and reuses them
    again = build_first_stage(retr, index, f"milvus:{milvus_uri}", tmp_path, {"index_type": "FLAT"}, family="test")
    assert {b.collection for b in again.backends} == names
    assert np.array_equal(again.retrieve(Queries(tokens, mask), 100)[1], ref_v)
    again.close()


@pytest.mark.slow
def test_a_milvus_server_ivf_index_and_a_bad_uri(milvus_uri: str, tmp_path: Path):
    from momentsearch.errors import FirstStageError

    index = _index(n_videos=400, streams=1)
    retr = _retriever(index, True)
    tokens, mask = _queries(s=1)
    _, ref = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 100)
    params = {"index_type": "IVF_FLAT", "nlist": "16", "nprobe": "16"}  # every list probed: exact
    stage = build_first_stage(retr, index, f"milvus:{milvus_uri}", tmp_path, params, family="test")
    assert np.array_equal(stage.retrieve(Queries(tokens, mask), 100)[1], ref)
    stage.close()
    with pytest.raises(FirstStageError, match="milvus: cannot connect to http://127.0.0.1:9"):
        build_first_stage(retr, index, "milvus:http://127.0.0.1:9", tmp_path, {}, family="test")
