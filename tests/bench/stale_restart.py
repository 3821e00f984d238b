#!/usr/bin/env python3
"""Time from restart to ready with N stale conversations (issue 4's startup budget).

Creates a data dir with the real binary (so the schema is the binary's own), marks N
conversations as left `running` by a dead instance -- each with a command in flight and a lease
far in the future naming another owner -- then restarts the server and measures until /ready
answers 200. Reference: the same restart with nothing stale, in the same run.

Usage: tests/bench/stale_restart.py [--binary build/app/agentdeck] [--count 1000] [--rounds 5]
"""
import argparse, json, os, shutil, socket, sqlite3, statistics, subprocess, sys, tempfile, time
import urllib.request, uuid


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, data_dir):
    port = free_port()
    began = time.monotonic()
    process = subprocess.Popen([binary, "--headless", "--listen", f"127.0.0.1:{port}",
                                "--data-dir", data_dir], stderr=subprocess.DEVNULL)
    deadline = began + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1).status == 200:
                return process, port, time.monotonic() - began
        except Exception:
            time.sleep(0.002)
    process.kill()
    sys.exit("the server did not become ready within 60 s")


def stop(process):
    process.terminate()
    process.wait(timeout=30)


def make_stale(data_dir, count):
    db = sqlite3.connect(os.path.join(data_dir, "agentdeck.db"))
    now = int(time.time() * 1000)
    db.execute("DELETE FROM events")
    db.execute("DELETE FROM conversations")
    for i in range(count):
        cid = str(uuid.uuid4())
        db.execute("INSERT INTO conversations (id, title, tags, created_at, updated_at, "
                   "execution_status, agent_kind, working_dir, workspace_owned, event_count, "
                   "lease_owner, lease_epoch, lease_expires_at) VALUES "
                   "(?, ?, '{}', ?, ?, 'running', 'shell', ?, 1, 2, 'dead-host/1', 3, ?)",
                   (cid, f"stale {i}", now, now, os.path.join(data_dir, "workspaces", cid),
                    now + 24 * 3600 * 1000))
        for seq, kind, source, extra in (
                (1, "MessageEvent", "user",
                 {"llm_message": {"role": "user", "content": [{"type": "text", "text": "sleep 30"}]}}),
                (2, "ActionEvent", "agent",
                 {"tool_name": "bash", "tool_call_id": str(uuid.uuid4()), "action": {"command": "sleep 30"}})):
            event = {"id": str(uuid.uuid4()), "kind": kind, "source": source,
                     "timestamp": "2026-01-01T00:00:00.000Z", "seq": seq, **extra}
            db.execute("INSERT INTO events (conversation_id, seq, id, kind, source, timestamp, body, "
                       "epoch) VALUES (?, ?, ?, ?, ?, ?, ?, 3)",
                       (cid, seq, event["id"], kind, source, now, json.dumps(event)))
    db.commit()
    db.close()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(here, "..", "..", "build", "app", "agentdeck"))
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="agentdeck-stale-")
    try:
        process, _, _ = start(args.binary, work)  # creates the schema
        stop(process)
        empty, stale = [], []
        for _ in range(args.rounds):
            make_stale(work, 0)
            process, _, seconds = start(args.binary, work)
            empty.append(seconds)
            stop(process)
            make_stale(work, args.count)
            process, port, seconds = start(args.binary, work)
            stale.append(seconds)
            paused = int(urllib.request.urlopen(
                f"http://127.0.0.1:{port}/api/conversations/count?status=paused").read())
            stop(process)
            if paused != args.count:
                sys.exit(f"only {paused} of {args.count} stale conversations were resolved")
        e, s = statistics.median(empty), statistics.median(stale)
        print(f"restart to ready, median of {args.rounds}: {s * 1000:.0f} ms with {args.count} "
              f"stale conversations, {e * 1000:.0f} ms with none (ratio {s / e:.2f}); "
              f"goal < 2000 ms: {'MET' if s < 2.0 else 'NOT MET'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
