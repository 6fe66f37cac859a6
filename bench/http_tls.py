#!/usr/bin/env python3
"""What TLS and basic auth (--web-config-file) cost on the agent's :9400, measured from outside.

Usage: bench/http_tls.py BUILD_DIR [--scrapes N]

Starts `kgpu agent` on the fake NVML (8x H100, 1 s interval, metrics only) twice: plain HTTP, and
with a web config (TLS 1.3, RSA 2048 server certificate, a client certificate required and
verified, one basic-auth user at bcrypt cost 10). Certificates are made with `openssl` in a
temporary directory; the hash with the system's libcrypt. Reports, as a Markdown table:
  1. kept-alive scrape latency (Python's http.client / ssl);
  2. a scrape on a new connection (TCP + TLS handshake + request);
  3. /metrics latency while 200 requests with made-up passwords arrive (each would be a bcrypt check);
  4. RSS after the runs.
No assertion: the numbers go to bench/RESULTS.md.
"""
import argparse
import base64
import ctypes
import http.client
import os
import ssl
import statistics
import subprocess
import tempfile
import threading
import time

from agent_bench import pct, rss_kib, start_agent




def bcrypt(password, cost):
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return lib.crypt(password.encode(), lib.crypt_gensalt(b"$2b$", cost, None, 0)).decode()


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(d):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench-ca", "-keyout",
            f"{d}/ca.key", "-out", f"{d}/ca.crt", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for name, ext, serial in [("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n", "2"),
                              ("client", "subjectAltName=DNS:prometheus\nextendedKeyUsage=clientAuth\n", "3")]:
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(ext)
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{d}/{name}.key", "-out",
                f"{d}/{name}.csr")
        openssl("x509", "-req", "-days", "2", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
                "-set_serial", serial, "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.crt")






class Client:
    def __init__(self, port, ctx=None, auth=None):
        self.port, self.ctx = port, ctx
        self.headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}

    def connect(self):
        if self.ctx:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=10, context=self.ctx)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def get(self, conn, path="/metrics", headers=None):
        conn.request("GET", path, headers=headers if headers is not None else self.headers)
        r = conn.getresponse()
        body = r.read()
        return r.status, body


def measure(client, scrapes):
    conn = client.connect()
    client.get(conn)  # warm: the connection (and the answer cache)
    keep = []
    for _ in range(scrapes):
        t0 = time.perf_counter()
        status, body = client.get(conn)
        keep.append((time.perf_counter() - t0) * 1000)
        assert status == 200 and len(body) > 1000, status
    conn.close()
    fresh = []
    for _ in range(min(scrapes, 200)):
        t0 = time.perf_counter()
        c = client.connect()
        status, _ = client.get(c)
        fresh.append((time.perf_counter() - t0) * 1000)
        c.close()
        assert status == 200, status
    return keep, fresh


def flood(client, n):
    """n requests with made-up passwords from another thread while /metrics is scraped."""
    answers = {}

    def attack():
        for i in range(n):
            c = client.connect()
            h = {"Authorization": "Basic " + base64.b64encode(f"prometheus:guess{i}".encode()).decode()}
            status, _ = client.get(c, headers=h)
            answers[status] = answers.get(status, 0) + 1
            c.close()

    t = threading.Thread(target=attack)
    conn = client.connect()
    lat = []
    t.start()
    while t.is_alive():
        t0 = time.perf_counter()
        status, _ = client.get(conn)
        lat.append((time.perf_counter() - t0) * 1000)
        assert status == 200, status
    t.join()
    conn.close()
    return lat, answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--scrapes", type=int, default=1000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kgpu-tls-")
    make_pki(tmp)
    with open(f"{tmp}/web.yml", "w") as f:
        f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
                f"basic_auth_users:\n  prometheus: {bcrypt('s3cret', 10)}\n")
    ctx = ssl.create_default_context(cafile=f"{tmp}/ca.crt")
    ctx.load_cert_chain(f"{tmp}/client.crt", f"{tmp}/client.key")

    rows = []
    for name, web, client in [("plain HTTP", None, None),
                              ("TLS 1.3 + client cert + basic auth", f"{tmp}/web.yml", "tls")]:
        os.makedirs(f"{tmp}/{name[:5]}", exist_ok=True)
        proc, port = start_agent(a.build, f"{tmp}/{name[:5]}", ["--web-config-file", web] if web else [])
        try:
            c = Client(port, ctx, "prometheus:s3cret") if client else Client(port)
            time.sleep(1.5)  # a first sample
            keep, fresh = measure(c, a.scrapes)
            fl, answers = flood(c, 200) if client else ([], {})
            rows.append((name, keep, fresh, fl, answers, rss_kib(proc.pid)))
        finally:
            proc.terminate()
            proc.wait()

    def fmt(v):
        return f"p50 {statistics.median(v):.2f} ms, p99 {pct(v, 0.99):.2f} ms" if v else "-"

    print("| endpoint | kept-alive scrape | new connection + scrape | scrape during 200 made-up passwords | RSS after |")
    print("|---|---|---|---|---|")
    for name, keep, fresh, fl, answers, rss in rows:
        flood_text = (f"{fmt(fl)}, max {max(fl):.1f} ms; answers {dict(sorted(answers.items()))}" if fl else "-")
        print(f"| {name} | {fmt(keep)} | {fmt(fresh)} | {flood_text} | {rss / 1024:.1f} MiB |")


if __name__ == "__main__":
    main()
