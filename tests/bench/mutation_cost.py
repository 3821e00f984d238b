#!/usr/bin/env python3
"""The cost of a mutation's audit record: the latency of POST .../unarchive (a change the audit
log records) and of GET by id (a read, which it does not), one keep-alive client sending one
request at a time, for two builds alternated run by run on the same machine.

Each run starts the binary (--headless, --runtime process, a key file of one named key, or the
same key unnamed for a build from before named keys, a temporary data dir), creates one conversation, warms up with 300 of each request, then times
2,000 of each per round. Reports the medians per run and per build.

Usage: tests/bench/mutation_cost.py --binary A [--binary B] [--runs 3] [--rounds 2]
"""
import argparse, http.client, json, re, shutil, statistics, subprocess, tempfile, time


def measure(binary, rounds):
    work = tempfile.mkdtemp(prefix="agentdeck-mutation-")
    with open(f"{work}/keys", "w") as keys:
        keys.write("bench k1\n")
    # A build from before named keys takes the key unnamed.
    named = "  --api-key-file" in subprocess.run([binary, "--help"], capture_output=True,
                                               text=True).stdout
    key = ["--api-key-file", f"{work}/keys"] if named else ["--session-api-key", "k1"]
    server = subprocess.Popen([binary, "--headless", "--listen", "127.0.0.1:0", "--data-dir",
                               f"{work}/data", *key, "--runtime", "process"],
                              stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in server.stderr:
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
                break
        connection = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"X-Session-API-Key": "k1", "User-Agent": "agentdeck-bench/1",
                   "Content-Type": "application/json"}
        connection.request("POST", "/api/conversations",
                           body=json.dumps({"agent": {"kind": "shell"}}), headers=headers)
        conversation = json.loads(connection.getresponse().read())["id"]

        def timed(method, path, count):
            times = []
            for _ in range(count):
                began = time.perf_counter()
                connection.request(method, path, headers=headers)
                answer = connection.getresponse()
                answer.read()
                times.append(time.perf_counter() - began)
                if answer.status != 200:
                    raise RuntimeError(f"{method} {path}: {answer.status}")
            return statistics.median(times) * 1e6

        post = f"/api/conversations/{conversation}/unarchive"
        get = f"/api/conversations/{conversation}"
        timed("POST", post, 300)
        timed("GET", get, 300)
        return [(timed("POST", post, 2000), timed("GET", get, 2000)) for _ in range(rounds)]
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", action="append", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    results = {binary: [] for binary in options.binary}
    for run in range(options.runs):
        for binary in options.binary:
            rounds = measure(binary, options.rounds)
            results[binary] += rounds
            print(f"run {run} {binary}: " + ", ".join(
                f"POST {post:.0f} us GET {get:.0f} us" for post, get in rounds), flush=True)
    for binary, rounds in results.items():
        print(f"{binary}: median POST .../unarchive "
              f"{statistics.median(r[0] for r in rounds):.0f} us, GET by id "
              f"{statistics.median(r[1] for r in rounds):.0f} us")


if __name__ == "__main__":
    main()
