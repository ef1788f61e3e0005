"""The obfuscated parsing service (veil.services): what obfuscation costs the client, and the server under load.

(i) Throughput, on the first ``--n`` sentences of the silver test split:

* client: ``RandomSubstitution.obfuscate`` at level P3 with OS-entropy draws (the release setting);
* server: the parser the server runs (``LoadedParser.parse``, the function behind ``POST /parse``) on the same
  sentences in requests of ``--batch`` sentences, in process (no HTTP);
* end to end: one ``ParseClient`` through a real ``veil parse serve`` process on loopback (obfuscation, JSON,
  HTTP, parsing, mapping back).

Each is the median of ``--reps`` runs after a warm-up. Target: obfuscation costs at most half of parsing
(time ratio <= 0.5).

(ii) Load: ``--clients`` concurrent clients (asyncio tasks, one ``httpx.AsyncClient`` each) send requests for
``--duration`` seconds to the same server process. Each request carries its own ``--batch`` sentences (request
``j`` holds test sentences ``j*batch .. (j+1)*batch - 1``, already obfuscated); every answer is checked against
the tree the same parser gives for that request's sentences in this process (number of trees, length of each
tree, heads and labels), so a lost, mixed-up or wrong answer is counted. Reports requests/s, sentences/s and
p50/p99 latency.

Prints a Markdown section to paste into benchmarks/RESULTS.md (this script does not edit it), or JSON with
``--json``.

    python benchmarks/parse_service.py [--n 1000] [--batch 16] [--clients 8] [--duration 20] [--parser biaffine]
        [--reps 3] [--model PATH] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time


def _timed(fn, reps: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(args, port: int) -> subprocess.Popen:
    """``veil parse serve`` in its own process (the clients and the server do not share a GIL)."""
    import httpx

    cmd = [sys.executable, "-m", "veil.cli", "parse", "serve", "--parser", args.parser, "--port", str(port),
           "--log-level", "warning", "--max-sentences", str(max(256, args.batch))]
    if args.model:
        cmd += ["--model", args.model]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not answer /health within 180 s")


async def _load(url: str, payloads: list[bytes], expected: list[list], clients: int, duration: float) -> dict:
    import httpx

    latencies: list[float] = []
    counts = {"ok": 0, "wrong": 0, "failed": 0, "sentences": 0}
    deadline = time.perf_counter() + duration

    async def one_client(c: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            r = 0
            while time.perf_counter() < deadline:
                j = (c * 7919 + r) % len(payloads)  # each client walks the requests from its own offset
                r += 1
                t = time.perf_counter()
                try:
                    res = await http.post("/parse", content=payloads[j], headers={"content-type": "application/json"})
                except httpx.HTTPError:
                    counts["failed"] += 1
                    continue
                latencies.append(time.perf_counter() - t)
                if res.status_code != 200:
                    counts["failed"] += 1
                    continue
                trees = res.json()["trees"]
                got = [(t["heads"], t["labels"]) for t in trees]
                right = len(got) == len(expected[j]) and all(
                    len(g[0]) == len(e[0]) for g, e in zip(got, expected[j])) and got == expected[j]
                counts["ok" if right else "wrong"] += 1
                counts["sentences"] += len(trees) if right else 0

    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(c) for c in range(clients)))
    elapsed = time.perf_counter() - t0
    lat = sorted(latencies)
    pick = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else (lambda q: float("nan"))
    return {**counts, "requests": counts["ok"] + counts["wrong"] + counts["failed"], "seconds": elapsed,
            "requests_per_s": (counts["ok"] + counts["wrong"]) / elapsed,
            "sentences_per_s": counts["sentences"] / elapsed,
            "p50_ms": pick(0.50), "p99_ms": pick(0.99), "max_ms": lat[-1] * 1000 if lat else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="test sentences for (i) and the request pool of (ii)")
    ap.add_argument("--batch", type=int, default=16, help="sentences per request")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients in (ii)")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of load in (ii)")
    ap.add_argument("--parser", default="biaffine", choices=("biaffine", "spacy-sm", "spacy-md"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", default=None, help="biaffine model file (default: the trained one)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = ap.parse_args()
    for name in ("n", "batch", "clients", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if not args.duration > 0:
        ap.error("--duration must be > 0")

    from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
    from veil.parsing.treebank import load_treebank
    from veil.results import git_commit
    from veil.services.parse_client import ParseClient
    from veil.services.parse_server import Limits, LoadedParser, read_request

    log = (lambda m: print(m, file=sys.stderr, flush=True))
    test = load_treebank("test", limit=args.n)
    words = sum(map(len, test))
    log("building the substitution vocabulary (silver train split)...")
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in load_treebank("train"))
    ob = RandomSubstitution(vocabulary=vocab, level="P3")  # OS entropy
    parser = LoadedParser.load(args.parser, model=args.model)
    chunks = [test[i:i + args.batch] for i in range(0, len(test), args.batch)]

    log("(i) throughput...")
    runs = {
        "client: obfuscate (random P3, OS entropy)": _timed(lambda: [ob.obfuscate(t.words, t.tags) for t in test],
                                                            args.reps),
        f"server: parse ({args.parser}, in process, {args.batch} per request)": _timed(
            lambda: [parser.parse(c) for c in chunks], args.reps),
    }
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start_server(args, port)
    try:
        with ParseClient(url, obfuscator=ob, batch_sentences=args.batch) as client:
            runs[f"end to end: one client over loopback HTTP ({args.batch} per request)"] = _timed(
                lambda: client.parse(test), args.reps)
        rates = {k: len(test) / statistics.median(v) for k, v in runs.items()}
        obf_s, parse_s = (statistics.median(v) for v in list(runs.values())[:2])
        ratio = obf_s / parse_s

        log(f"(ii) load: {args.clients} clients for {args.duration:g} s...")
        payloads, expected = [], []
        for c in chunks:
            sent = [ob.obfuscate(t.words, t.tags) for t in c]
            body = json.dumps({"sentences": [{"tokens": list(o.words), "tags": list(o.tags),
                                              "spaces": list(t.spaces)} for o, t in zip(sent, c)]}).encode()
            payloads.append(body)
            expected.append([(list(h), list(lab)) for h, lab in parser.parse(read_request(body, Limits()))])
        load = asyncio.run(_load(url, payloads, expected, args.clients, args.duration))
    finally:
        server.terminate()
        server.wait(30)
    load1 = os.getloadavg()[0]
    result = {"parser": args.parser, "sentences": len(test), "words": words, "batch": args.batch,
              "rates": rates, "runs": runs, "obfuscation_over_parsing": ratio, "target": 0.5,
              "load": {"clients": args.clients, "duration_s": args.duration, "distinct_requests": len(payloads),
                       **load}, "commit": git_commit(), "load_average_1min": load1}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    cmd = " ".join(["python", "benchmarks/parse_service.py", *sys.argv[1:]])
    ok = load["wrong"] == 0 and load["failed"] == 0
    lines = [f"## parse service: obfuscation cost and load ({cmd}), {stamp}", "",
             f"- commit: {result['commit']}",
             f"- machine: {platform.platform()}, {os.cpu_count()} CPUs, OMP_NUM_THREADS="
             f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, 1-min load average {load1:.2f} after the run",
             f"- workload: first {len(test)} silver test sentences ({words} words); {args.parser} server "
             f"(`veil parse serve`, one torch thread, one parse at a time) on loopback; median of {args.reps} runs "
             "after a warm-up", "",
             "| what | sentences/s (median) | runs (s) |", "|---|---:|---|"]
    lines += [f"| {k} | {rates[k]:.1f} | {', '.join(f'{x:.3f}' for x in runs[k])} |" for k in runs]
    lines += ["", f"obfuscation time / parsing time: **{ratio:.3f}** (target <= 0.5: "
                  f"{'met' if ratio <= 0.5 else 'NOT met'})", "",
              f"| clients | seconds | requests | requests/s | sentences/s | p50 ms | p99 ms | max ms | right | "
              "wrong | failed |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
              f"| {args.clients} | {load['seconds']:.1f} | {load['requests']} | {load['requests_per_s']:.1f} | "
              f"{load['sentences_per_s']:.1f} | {load['p50_ms']:.0f} | {load['p99_ms']:.0f} | {load['max_ms']:.0f} | "
              f"{load['ok']} | {load['wrong']} | {load['failed']} |", "",
              f"Every answer checked against the in-process parse of its own request ({len(payloads)} distinct "
              f"requests of {args.batch} sentences): {'all right' if ok else 'ERRORS (see wrong/failed)'}.", ""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
