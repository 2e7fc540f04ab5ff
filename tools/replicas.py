"""Several ``streamlit run`` replicas behind nginx, for a room too large for one server process.

    python tools/replicas.py --replicas 2 --port 8080                  # http://<this machine>:8080
    python tools/replicas.py --replicas 2 --port 8080 --host 127.0.0.1 # this machine only

One Streamlit server runs its pages on one core at a time (Python's GIL), so a room of visitors
queues behind it; each replica is its own process with its own core. nginx (Debian:
``apt-get install -y nginx``) sends each visitor to one replica and keeps it there: its first
request gets a cookie with a random key, and nginx picks the replica by a consistent hash of that
key, so the page, its files and its websocket (``/_stcore/stream``, upgraded) all reach the replica
that holds the visitor's session, also after a reconnect. (``ip_hash`` would put a whole lecture
hall behind one NAT address on one replica.) The replicas share one cookie secret, as Streamlit
asks of a deployment with several servers.

Everything runs in the foreground from a temporary folder (nginx's configuration, pid, logs and
temporary files; not the system's nginx service); Ctrl-C or SIGTERM stops nginx and the replicas.
Every response carries ``X-Kvviz-Replica`` (the replica's address), which the tests and
bench/room.py read.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COOKIE = "kvviz_replica"

NGINX_CONF = """# written by tools/replicas.py: {n} kvviz replicas behind one address
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
{user}
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    # a visitor's key: its cookie, or on its first request a new random one (sent back as the cookie)
    map $cookie_{cookie} $kvviz_key {{ "" $request_id; default $cookie_{cookie}; }}
    map $cookie_{cookie} $kvviz_new_cookie {{ "" "{cookie}=$request_id; Path=/; HttpOnly; SameSite=Lax"; default ""; }}
    map $http_upgrade $connection_upgrade {{ default upgrade; "" close; }}
    upstream kvviz {{
        hash $kvviz_key consistent;
{servers}
    }}
    server {{
        listen {host}:{port};
        location / {{
            proxy_pass http://kvviz;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Upgrade $http_upgrade;          # /_stcore/stream: the websocket
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 1d;                           # a session's websocket stays open
            proxy_buffering off;                             # stream, no temporary files
            add_header Set-Cookie $kvviz_new_cookie always;  # nothing once the visitor has one
            add_header X-Kvviz-Replica $upstream_addr always;
        }}
    }}
}}
"""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def nginx_conf(tmp: Path, host: str, port: int, replica_ports: list[int]) -> str:
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in replica_ports)
    user = "user nobody nogroup;" if os.geteuid() == 0 else ""      # as root, workers drop to nobody
    return NGINX_CONF.format(n=len(replica_ports), tmp=tmp, user=user, cookie=COOKIE, servers=servers,
                             host=host, port=port)


def _healthy(url: str) -> bool:
    try:
        return urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok"
    except OSError:
        return False


def _ready(url: str) -> bool:
    """The replica answers and has finished its warm-up (kvviz/ui/app/warmup.py: it answers at once and
    prepares the pages' default runs and its real models in the background)."""
    if not _healthy(url):
        return False
    try:
        return json.loads(urllib.request.urlopen(url + "/_kvviz/ready", timeout=2).read()).get("ready") is True
    except (OSError, ValueError):
        return False


class Replicas:
    """``n`` replicas of ``streamlit run app.py`` on free local ports and nginx on ``host:port`` in
    front of them; a context manager (``stop()`` ends all of them)."""

    def __init__(self, n: int = 2, port: int = 8080, host: str = "0.0.0.0", nginx: str = "nginx",
                 settings: list[str] | None = None, log=subprocess.DEVNULL):
        if shutil.which(nginx) is None:
            raise FileNotFoundError("nginx is not installed (Debian: apt-get install -y nginx)")
        self.n, self.port, self.host, self.nginx, self.log = n, port, host, nginx, log
        self.settings = settings or []
        self.tmp = Path(tempfile.mkdtemp(prefix="kvviz-replicas-"))
        os.chmod(self.tmp, 0o755)
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen] = []
        self.proxy: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 600.0) -> Replicas:
        env = {**os.environ, "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(16)}   # one for every replica
        flags = [f"--{s.split('=', 1)[0]}={s.split('=', 1)[1]}" for s in self.settings]
        for _ in range(self.n):
            p = free_port()
            self.ports.append(p)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(p),
                 "--server.address", "127.0.0.1", "--server.headless", "true", *flags],
                cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT))
        t0 = time.time()
        for p, proc in zip(self.ports, self.procs):         # each warmed up before nginx sends it a visitor
            while not _ready(f"http://127.0.0.1:{p}"):
                if proc.poll() is not None or time.time() - t0 > timeout:
                    self.stop()
                    raise RuntimeError(f"the replica on port {p} did not start")
                time.sleep(0.1)
        conf = self.tmp / "nginx.conf"
        conf.write_text(nginx_conf(self.tmp, self.host, self.port, self.ports), encoding="utf-8")
        errors = self.tmp / "error.log"
        self.proxy = subprocess.Popen([self.nginx, "-p", str(self.tmp), "-c", str(conf), "-e", str(errors)],
                                      stdout=self.log, stderr=subprocess.STDOUT)
        while not _healthy(self.url):
            if self.proxy.poll() is not None or time.time() - t0 > timeout:
                err = errors.read_text(errors="replace")[-2000:] if errors.exists() else ""
                self.stop()
                raise RuntimeError(f"nginx did not start: {err}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        for proc in ([self.proxy] if self.proxy else []) + self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in ([self.proxy] if self.proxy else []) + self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> Replicas:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=2, help="streamlit run processes (one per core is the most useful)")
    ap.add_argument("--port", type=int, default=8080, help="the address's port (default 8080)")
    ap.add_argument("--host", default="0.0.0.0", help="where nginx listens (default: every interface)")
    ap.add_argument("--nginx", default="nginx", help="the nginx binary")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.OPTION=VALUE",
                    help="a Streamlit option for every replica, e.g. server.maxUploadSize=10")
    a = ap.parse_args()
    r = Replicas(a.replicas, a.port, a.host, a.nginx, a.set, log=None)   # the replicas' logs on this terminal
    def stop(*_) -> None:                     # SIGTERM as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        r.start()
        print(f"kvviz: {a.replicas} replicas (ports {', '.join(map(str, r.ports))}) behind nginx at {r.url} "
              f"(Ctrl-C stops them)", flush=True)
        while r.proxy.poll() is None and all(p.poll() is None for p in r.procs):
            time.sleep(0.5)
        print("kvviz: nginx or a replica stopped; stopping the rest", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        r.stop()


if __name__ == "__main__":
    raise SystemExit(main())
