#!/usr/bin/env python3
"""The agent's :9400 endpoint under overload and hostile requests, measured from outside.

Usage: bench/http_overload.py BUILD_DIR [--scrapes N] [--idle N]

Starts `kgpu agent` on the fake NVML (8x H100, 1 s interval, metrics only) and reports:
  1. kept-alive scrape latency with Python's http.client, which does not set TCP_NODELAY, so a
     response written in pieces meets the client's delayed ACK (the ~40 ms stall);
  2. /health and /metrics latency while N idle and half-sent ("slowloris") connections are held;
  3. RSS at rest, at the peak of 50 requests of half a million headers each, and after them.
Prints a Markdown table. No assertion: the numbers go to bench/RESULTS.md.
"""
import argparse
import http.client
import resource
import socket
import statistics
import threading
import time

from agent_bench import pct, rss_kib, start_agent








def keepalive_scrapes(port, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("GET", "/metrics")
        body = conn.getresponse().read()
        lat.append((time.perf_counter() - t0) * 1000)
        assert len(body) > 1000
    conn.close()
    return lat


def one_get(port, path):
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, (time.perf_counter() - t0) * 1000


def hostile(port):
    req = b"GET /metrics HTTP/1.1\r\nHost: a\r\n" + b"X-a: b\r\n" * 500_000 + b"\r\n"
    s = socket.create_connection(("127.0.0.1", port))
    status = None

    def reader():
        nonlocal status
        try:
            data = s.recv(4096)
            if data.startswith(b"HTTP/1."):
                status = int(data[9:12])
        except OSError:
            pass

    t = threading.Thread(target=reader)
    t.start()
    try:
        s.sendall(req)
    except OSError:
        pass
    t.join(10)
    s.close()
    return status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--scrapes", type=int, default=2000)
    ap.add_argument("--idle", type=int, default=1000)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    proc, port = start_agent(a.build)
    try:
        time.sleep(1.5)
        rows = []
        lat = keepalive_scrapes(port, a.scrapes)
        stalls = sum(1 for x in lat if x > 20)
        rows.append(("kept-alive scrapes (http.client, no TCP_NODELAY)",
                     f"p50 {statistics.median(lat):.2f} ms, p99 {pct(lat, 0.99):.2f} ms, max {max(lat):.2f} ms; "
                     f"{stalls} of {len(lat)} over 20 ms"))

        idle = []
        for i in range(a.idle):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 2:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            idle.append(s)
        time.sleep(0.5)
        h = [one_get(port, "/health") for _ in range(50)]
        m = [one_get(port, "/metrics") for _ in range(50)]
        ok = all(st == 200 for st, _ in h + m)
        rows.append((f"/health with {a.idle} idle/slow connections held",
                     f"p50 {statistics.median(x for _, x in h):.2f} ms, max {max(x for _, x in h):.2f} ms"
                     + ("" if ok else " (errors!)")))
        rows.append((f"/metrics with {a.idle} idle/slow connections held",
                     f"p50 {statistics.median(x for _, x in m):.2f} ms, max {max(x for _, x in m):.2f} ms"))
        rows.append(("RSS with those connections", f"{rss_kib(proc.pid) / 1024:.1f} MiB"))
        for s in idle:
            s.close()
        time.sleep(0.5)

        rest = rss_kib(proc.pid)
        peak = rest
        statuses = set()
        for _ in range(50):
            statuses.add(hostile(port))
            peak = max(peak, rss_kib(proc.pid))
        time.sleep(1)
        after = rss_kib(proc.pid)
        rows.append(("RSS at rest", f"{rest / 1024:.1f} MiB"))
        rows.append(("50 requests of 500,000 headers (4 MB each)", f"answered {sorted(statuses, key=str)}"))
        rows.append(("RSS peak during them / 1 s after", f"{peak / 1024:.1f} MiB / {after / 1024:.1f} MiB"))
        print("| measure | result |\n|---|---|")
        for k, v in rows:
            print(f"| {k} | {v} |")
    finally:
        proc.terminate()
        proc.wait(5)


if __name__ == "__main__":
    main()
