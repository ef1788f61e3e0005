"""The obfuscated parsing service (veil.services): what obfuscation costs the client, and the server under load.

(i) Throughput, on the first ``--n`` sentences of the silver test split:

* client: ``RandomSubstitution.obfuscate`` at level P3 with OS-entropy draws (the release setting);
* server: the parser the server runs (``LoadedParser.parse``, the function behind ``POST /parse``) on the same
  sentences in requests of ``--batch`` sentences, in process (no HTTP);
* end to end: one ``ParseClient`` through a real ``veil parse serve`` process on loopback (obfuscation, JSON,
  HTTP, parsing, mapping back).

Each is the median of ``--reps`` runs after a warm-up. Target: obfuscation costs at most half of parsing
(time ratio <= 0.5).

(ii) Load against workers: one ``veil parse serve --workers W`` process per ``--workers`` value (default 1 and 2;
each worker a process with its own parser, one torch thread, one parse at a time), all started before the load
and idle when not measured. The SAME load generator then runs against each in turn, ``--rounds`` times,
alternating the servers (W=1, W=2, W=1, W=2, ...) so that a change in the machine's load hits all alike:
``--clients`` concurrent clients (asyncio tasks in this process, one ``httpx.AsyncClient`` and so one connection
each; the load generator shares the machine's cores with the workers) send requests for ``--duration`` seconds.
Each request carries its own ``--batch`` sentences (request ``j`` holds test sentences ``j*batch ..
(j+1)*batch - 1``, already obfuscated); every answer is checked against the tree the same parser gives for that
request's sentences in this process (number of trees, length of each tree, heads and labels), so a lost,
mixed-up or wrong answer is counted. Reports, per worker count, the median sentences/s over the rounds (each
round's value listed), its ratio to the first worker count, requests, p50/p99 latency over all rounds, and the
right/wrong/failed answers.

Appends a Markdown section to ``--results-file`` (default benchmarks/RESULTS.md; written atomically) and prints
it, or prints JSON with ``--json`` (nothing appended).

    python benchmarks/parse_service.py [--n 1000] [--batch 16] [--clients 8] [--duration 15] [--rounds 3]
        [--workers 1,2] [--parser biaffine] [--model PATH] [--treebank silver-sm|FOLDER] [--reps 3]
        [--results-file benchmarks/RESULTS.md] [--json]
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
import threading
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


def _server_cpu_s(pid: int) -> float:
    """CPU seconds used so far by the server process ``pid`` and its children (its workers); nan off Linux."""
    from pathlib import Path

    tick, total = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100, 0.0
    try:
        stats = {int(p.parent.name): p.read_text().rsplit(")", 1)[1].split() for p in Path("/proc").glob("[0-9]*/stat")
                 if p.exists()}
    except OSError:
        return float("nan")
    for proc, fields in stats.items():
        if proc == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return total if pid in stats else float("nan")


def _start_server(args, port: int, workers: int) -> subprocess.Popen:
    """``veil parse serve --workers W`` in its own process(es) (the clients and the server do not share a GIL)."""
    import httpx

    cmd = [sys.executable, "-m", "veil.cli", "parse", "serve", "--parser", args.parser, "--port", str(port),
           "--log-level", "warning", "--max-sentences", str(max(256, args.batch)), "--workers", str(workers)]
    if args.model:
        cmd += ["--model", args.model]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    lines = []
    while time.monotonic() < deadline:  # the server prints "serving" once every worker has loaded its parser
        line = proc.stdout.readline()
        lines.append(line)
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {''.join(lines)[-2000:]}{proc.stdout.read()[-2000:]}")
        if line.startswith("veil: serving"):
            break
    else:
        proc.kill()
        raise RuntimeError("the server did not start within 300 s")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # drain it: a full pipe would block the server
    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code != 200:
        raise RuntimeError("the server's /health did not answer 200")
    return proc


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
            "p50_ms": pick(0.50), "p99_ms": pick(0.99), "max_ms": lat[-1] * 1000 if lat else float("nan"),
            "latencies_s": latencies}


def _workers_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"give worker counts separated by commas, such as 1,2; got {text!r}")
    if not values or any(v < 1 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"worker counts must be distinct and >= 1, got {text!r}")
    return values


def _load_rows(runs: dict[int, list[dict]], reference: int) -> dict[int, dict]:
    """Per worker count: the median sentences/s over the rounds, its ratio to ``reference``, pooled latencies."""
    rows = {}
    for w, rounds in runs.items():
        lat = sorted(x for r in rounds for x in r["latencies_s"])
        pick = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else (lambda q: float("nan"))
        rows[w] = {"sentences_per_s": statistics.median(r["sentences_per_s"] for r in rounds),
                   "rounds_sentences_per_s": [r["sentences_per_s"] for r in rounds],
                   "requests_per_s": statistics.median(r["requests_per_s"] for r in rounds),
                   "server_cores": statistics.median(r["server_cores"] for r in rounds),
                   "seconds": sum(r["seconds"] for r in rounds),
                   **{k: sum(r[k] for r in rounds) for k in ("requests", "ok", "wrong", "failed", "sentences")},
                   "p50_ms": pick(0.50), "p99_ms": pick(0.99), "max_ms": lat[-1] * 1000 if lat else float("nan")}
    for w in rows:
        rows[w]["vs_reference"] = rows[w]["sentences_per_s"] / rows[reference]["sentences_per_s"] \
            if rows[reference]["sentences_per_s"] > 0 else float("nan")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="test sentences for (i) and the request pool of (ii)")
    ap.add_argument("--batch", type=int, default=16, help="sentences per request")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients in (ii)")
    ap.add_argument("--duration", type=float, default=15.0, help="seconds of load per server and round in (ii)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of (ii), alternating the servers")
    ap.add_argument("--workers", type=_workers_list, default=[1, 2],
                    help="worker counts to compare, comma-separated (the first is the reference); default 1,2")
    ap.add_argument("--parser", default="biaffine", choices=("biaffine", "spacy-sm", "spacy-md"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", default=None, help="biaffine model file (default: the trained one)")
    ap.add_argument("--treebank", default="silver-sm",
                    help="silver-sm (default) or a folder with train.conllu and test.conllu (Penn tags in XPOS)")
    ap.add_argument("--results-file", default="benchmarks/RESULTS.md",
                    help="Markdown file the section is appended to (default benchmarks/RESULTS.md)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of Markdown (nothing appended)")
    args = ap.parse_args()
    for name in ("n", "batch", "clients", "reps", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if not args.duration > 0:
        ap.error("--duration must be > 0")
    from veil.services.workers import max_workers

    if max(args.workers) > max_workers():
        ap.error(f"--workers: at most {max_workers()} on this machine (twice its CPU cores)")

    from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
    from veil.parsing.treebank import load_treebank
    from veil.results import git_commit
    from veil.services.parse_client import ParseClient
    from veil.services.parse_server import Limits, LoadedParser, read_request

    log = (lambda m: print(m, file=sys.stderr, flush=True))
    test = load_treebank("test", args.treebank, limit=args.n)
    words = sum(map(len, test))
    log(f"building the substitution vocabulary ({args.treebank} train split)...")
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in load_treebank("train", args.treebank))
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
    log(f"starting one server per worker count ({', '.join(map(str, args.workers))})...")
    servers: dict[int, tuple[str, subprocess.Popen]] = {}
    try:
        for w in args.workers:
            port = _free_port()
            servers[w] = (f"http://127.0.0.1:{port}", _start_server(args, port, w))
        url = servers[args.workers[0]][0]
        with ParseClient(url, obfuscator=ob, batch_sentences=args.batch) as client:
            runs[f"end to end: one client over loopback HTTP ({args.batch} per request, "
                 f"{args.workers[0]} worker{'s' if args.workers[0] > 1 else ''})"] = _timed(
                lambda: client.parse(test), args.reps)
        rates = {k: len(test) / statistics.median(v) for k, v in runs.items()}
        obf_s, parse_s = (statistics.median(v) for v in list(runs.values())[:2])
        ratio = obf_s / parse_s

        payloads, expected = [], []
        for c in chunks:
            sent = [ob.obfuscate(t.words, t.tags) for t in c]
            body = json.dumps({"sentences": [{"tokens": list(o.words), "tags": list(o.tags),
                                              "spaces": list(t.spaces)} for o, t in zip(sent, c)]}).encode()
            payloads.append(body)
            expected.append([(list(h), list(lab)) for h, lab in parser.parse(read_request(body, Limits()))])
        loads: dict[int, list[dict]] = {w: [] for w in args.workers}
        for r in range(args.rounds):
            for w in (args.workers if r % 2 == 0 else args.workers[::-1]):  # alternate the order too
                log(f"(ii) round {r + 1}/{args.rounds}: {args.clients} clients, {w} worker(s), "
                    f"{args.duration:g} s...")
                cpu = _server_cpu_s(servers[w][1].pid)
                loads[w].append(asyncio.run(_load(servers[w][0], payloads, expected, args.clients, args.duration)))
                loads[w][-1]["server_cores"] = (_server_cpu_s(servers[w][1].pid) - cpu) / loads[w][-1]["seconds"]
    finally:
        for _, proc in servers.values():
            proc.terminate()
        for _, proc in servers.values():
            proc.wait(30)
    load1 = os.getloadavg()[0]
    rows = _load_rows(loads, args.workers[0])
    result = {"parser": args.parser, "sentences": len(test), "words": words, "batch": args.batch,
              "rates": rates, "runs": runs, "obfuscation_over_parsing": ratio, "target": 0.5,
              "load": {"clients": args.clients, "duration_s": args.duration, "rounds": args.rounds,
                       "distinct_requests": len(payloads), "by_workers": rows},
              "commit": git_commit(), "load_average_1min": load1, "cpus": os.cpu_count()}
    if args.json:
        for w in rows:
            rows[w].pop("latencies_s", None)
        print(json.dumps(result, indent=2))
        return
    text = _markdown(args, result, len(payloads), load1)
    print(text)
    _append(args.results_file, text)
    log(f"appended to {args.results_file}")


def _markdown(args, result: dict, distinct: int, load1: float) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    cmd = " ".join(["python", "benchmarks/parse_service.py", *sys.argv[1:]])
    rows, rates, runs, ratio = result["load"]["by_workers"], result["rates"], result["runs"], \
        result["obfuscation_over_parsing"]
    ok = all(r["wrong"] == 0 and r["failed"] == 0 for r in rows.values())
    ref = args.workers[0]
    lines = [f"## parse service: obfuscation cost and load against workers ({cmd}), {stamp}", "",
             f"- commit: {result['commit']}",
             f"- machine: {platform.platform()}, {os.cpu_count()} CPUs, OMP_NUM_THREADS="
             f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, 1-min load average {load1:.2f} after the run",
             f"- workload: first {result['sentences']} test sentences of {args.treebank} ({result['words']} words); "
             f"{args.parser} server (`veil parse serve --workers W`: W processes, one parser, one torch thread and "
             f"one parse at a time each) on loopback; median of {args.reps} runs after a warm-up",
             f"- load: the same generator for every W ({args.clients} clients, one connection each, in the "
             f"benchmark's process, sharing the cores with the workers), {args.duration:g} s per server and round, "
             f"{args.rounds} rounds alternating the servers; server CPU: the CPU time the server's processes used "
             "per second of load (median of rounds; on a machine busy with other work it shows how much CPU the "
             "workers got)", "",
             "| what | sentences/s (median) | runs (s) |", "|---|---:|---|"]
    lines += [f"| {k} | {rates[k]:.1f} | {', '.join(f'{x:.3f}' for x in runs[k])} |" for k in runs]
    lines += ["", f"obfuscation time / parsing time: **{ratio:.3f}** (target <= 0.5: "
                  f"{'met' if ratio <= 0.5 else 'NOT met'})", "",
              f"| workers | clients | sentences/s (median of rounds) | vs {ref} worker{'s' if ref > 1 else ''} | "
              "rounds (sentences/s) | server CPU (cores) | requests/s | requests | p50 ms | p99 ms | max ms | right | "
              "wrong | failed |", "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for w, r in rows.items():
        lines.append(f"| {w} | {args.clients} | {r['sentences_per_s']:.1f} | {r['vs_reference']:.2f} | "
                     f"{', '.join(f'{x:.1f}' for x in r['rounds_sentences_per_s'])} | {r['server_cores']:.2f} | "
                     f"{r['requests_per_s']:.1f} | "
                     f"{r['requests']} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['max_ms']:.0f} | {r['ok']} | "
                     f"{r['wrong']} | {r['failed']} |")
    lines += ["", f"Every answer checked against the in-process parse of its own request ({distinct} distinct "
                  f"requests of {args.batch} sentences): {'all right' if ok else 'ERRORS (see wrong/failed)'}.", ""]
    return "\n".join(lines)


def _append(path: str, text: str) -> None:
    """Append ``text`` to ``path`` atomically (the file is rewritten whole through a temporary file)."""
    from pathlib import Path

    from veil._io import atomic_write_text

    old = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else ""
    atomic_write_text(path, old + ("\n" if old and not old.endswith("\n") else "") + text + "\n")


if __name__ == "__main__":
    main()
