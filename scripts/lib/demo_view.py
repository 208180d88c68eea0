#!/usr/bin/python3
"""The live view of scripts/demo: prints what changed since the last look, one line per change.

    demo_view.py poll STATE ELASTICCTL T0    look at squeue and elasticd, print the changes
    demo_view.py summary STATE               one line per job: sizes, batches, rescales

STATE is a JSON file this script keeps between calls (what it saw last). After each poll,
STATE.sh holds what the demo checks, as shell assignments: VIEW_GREW, VIEW_SHRANK and
VIEW_BATCH_WITH_GPUS (changes seen: growths, shrinks, GPU changes that moved the batch by 10% or
more too) and
VIEW_GPUS_<job id> (GPUs of each elastic job). Jobs are named as squeue
and sacct name them: array tasks as ARRAY_TASK (12_0), whatever id elasticd knows them by.
A change is printed once; when nothing changed for HEARTBEAT seconds, one line says how far the
running jobs are (their samples trained of their training goal, from elasticd).
"""
import json
import os
import subprocess
import sys
import time

HEARTBEAT = 20  # seconds without a printed line before a progress line


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"names": {}, "jobnames": {}, "queue": {}, "elastic": {}, "events": [], "extensions": {},
                "last_line": 0.0, "last_progress": "", "max": {}, "min_batch": {}, "max_batch": {}}


def save(path, state):
    with open(path + ".new", "w") as f:
        json.dump(state, f)
    os.replace(path + ".new", path)


def squeue():
    """{job id: {display, name, state, nodes, gres, reason}} of every job in the queue."""
    out = subprocess.run(["squeue", "-h", "-o", "%A|%i|%j|%T|%N|%n|%b|%r"], capture_output=True, text=True,
                         check=True).stdout
    jobs = {}
    for line in out.splitlines():
        f = line.split("|")
        if len(f) != 8:
            continue
        gres = f[6].replace("gres:", "").replace("gres/", "").replace("gpu:", "").replace("N/A", "")
        # Where it runs, or (pending) the node it asked for.
        nodes = f[4] or f[5]
        jobs[f[0]] = {"display": f[1], "name": f[2], "state": f[3], "nodes": nodes, "gres": gres, "reason": f[7]}
    return jobs


def elastic_status(ctl):
    st = subprocess.run([ctl, "status", "--json"], capture_output=True, text=True)
    if st.returncode != 0:
        raise SystemExit(f"demo_view: elasticctl status failed: {st.stderr.strip() or st.stdout.strip()}")
    return {str(j["job_id"]): j for j in json.loads(st.stdout).get("jobs", [])}


def lr_text(old, new, rule):
    if f"{old:.2f}" == f"{new:.2f}":
        return f"lr x{new:.2f} ({rule})"
    return f"lr x{old:.2f} -> x{new:.2f} ({rule})"


def noise_text(j):
    n = j.get("noise_scale")
    if isinstance(n, (int, float)):
        return f", gradient noise scale {n:.0f}"
    if n == "inf":
        return ", gradient noise scale beyond measurement"
    return ""


def poll(state, ctl, t0):
    now = time.time()
    lines = []
    name = lambda jid: state["names"].get(jid, jid)  # noqa: E731
    queue = squeue()
    for jid, q in queue.items():
        state["names"][jid] = q["display"]
        state["jobnames"][jid] = q["name"]
    status = elastic_status(ctl)

    # Extension jobs: when elasticd submits one, and when it ends.
    for jid, q in queue.items():
        if not q["name"].startswith("elastic-ext:") or jid in state["extensions"]:
            continue
        parent = q["name"].split(":")[1]
        state["extensions"][jid] = parent
        lines.append(f"job {name(parent)}: elasticd submitted extension job {jid} ({q['gres']} GPUs on {q['nodes']})")
    # Ordinary jobs: waiting (and why), running, gone from the queue.
    for jid, q in sorted(queue.items(), key=lambda kv: int(kv[0])):
        if q["name"].startswith("elastic-ext:"):
            continue
        old = state["queue"].get(jid)
        if q["state"] == "PENDING" and (old is None or old["reason"] != q["reason"]):
            why = "to be scheduled" if q["reason"] == "None" else f"({q['reason']})"
            lines.append(f"job {name(jid)} ({q['name']}): waiting {why} for {q['gres']} GPUs")
        elif q["state"] == "RUNNING" and (old is None or old["state"] != "RUNNING"):
            lines.append(f"job {name(jid)} ({q['name']}): running on {q['nodes']} with {q['gres']} GPUs")
        state["queue"][jid] = {"state": q["state"], "reason": q["reason"]}
    for jid in [j for j in state["queue"] if j not in queue]:
        if state["queue"][jid]["state"] != "GONE":
            lines.append(f"job {name(jid)} ({state['jobnames'].get(jid, '?')}): left the queue")
            state["queue"][jid]["state"] = "GONE"
    for jid in [j for j, p in state["extensions"].items() if p is not None and j not in queue]:
        lines.append(f"job {name(state['extensions'][jid])}: extension job {jid} ended")
        state["extensions"][jid] = None

    # Elastic jobs: GPUs, global batch and learning-rate factor, as elasticd records them at
    # each acknowledged change.
    for jid, j in sorted(status.items(), key=lambda kv: int(kv[0])):
        cur = {"gpus": j["gpus"], "batch": j["batch"], "lr": j.get("lr_factor", 1.0)}
        old = state["elastic"].get(jid)
        rule = j.get("lr_scaling", "none")
        if state["queue"].get(jid, {}).get("state") == "GONE":
            continue  # ended: its extensions go as it goes, no change of its own
        if old is None:
            how = "chosen by elasticd within --elastic-batch" if j.get("batch_elastic") else "its own: no --elastic-batch"
            lines.append(f"job {name(jid)}: registered with elasticd, elastic between {j['base_gpus']} and "
                         f"{j['max_gpus']} {j['gpu_type']} GPUs; batch {how}; lr rule {rule}")
            # Changes are counted from the base size (a first look may come after a growth).
            old = state["elastic"][jid] = {"gpus": j["base_gpus"], "batch": cur["batch"], "lr": cur["lr"]}
        if cur["gpus"] != old["gpus"] or (old["batch"] and cur["batch"] and cur["batch"] != old["batch"]):
            gpus_changed = cur["gpus"] != old["gpus"]
            batch_changed = bool(old["batch"] and cur["batch"]) and cur["batch"] != old["batch"]
            text = f"job {name(jid)}: "
            if gpus_changed:
                text += f"{old['gpus']} -> {cur['gpus']} GPUs, "
                text += (f"batch {old['batch']} -> {cur['batch']}" if batch_changed
                         else f"batch {cur['batch'] or '(not reported yet)'}")
            else:
                text += f"batch {old['batch']} -> {cur['batch']} at {cur['gpus']} GPUs"
            text += ", " + lr_text(old["lr"], cur["lr"], rule)
            if batch_changed:
                text += noise_text(j)
            lines.append(text)
            state["events"].append({"t": now - t0, "job": jid, "from_gpus": old["gpus"], "to_gpus": cur["gpus"],
                                    "from_batch": old["batch"], "to_batch": cur["batch"], "batch_changed": batch_changed})
        state["elastic"][jid] = cur
        state["max"][jid] = max(cur["gpus"], state["max"].get(jid, 0))
        if cur["batch"]:
            state["min_batch"][jid] = min(cur["batch"], state["min_batch"].get(jid, cur["batch"]))
            state["max_batch"][jid] = max(cur["batch"], state["max_batch"].get(jid, 0))

    # Nothing to say for a while: how far the elastic jobs are.
    if not lines and now - state["last_line"] >= HEARTBEAT and status:
        parts = []
        for jid, j in sorted(status.items(), key=lambda kv: int(kv[0])):
            total, done = j.get("total_samples", 0), j.get("samples_done", 0)
            pct = f"{100 * done / total:.0f}% trained" if total else "training"
            parts.append(f"{name(jid)} {pct} at {j['gpus']} GPUs")
        progress = "; ".join(parts)
        if progress != state["last_progress"]:
            lines.append("progress: " + progress)
            state["last_progress"] = progress
    for line in lines:
        print(f"  [{now - t0:4.0f} s] {line}", flush=True)
    if lines:
        state["last_line"] = now


def facts(state):
    """What the demo checks, as shell assignments. A batch change counts with a GPU change when the
    batch moved by 10% or more (elasticd also makes small corrections as its model learns)."""
    ev = state["events"]
    big = lambda e: e["batch_changed"] and abs(e["to_batch"] / e["from_batch"] - 1) >= 0.1  # noqa: E731
    out = [f"VIEW_GREW={sum(1 for e in ev if e['to_gpus'] > e['from_gpus'])}",
           f"VIEW_SHRANK={sum(1 for e in ev if e['to_gpus'] < e['from_gpus'])}",
           f"VIEW_BATCH_WITH_GPUS={sum(1 for e in ev if e['to_gpus'] != e['from_gpus'] and big(e))}"]
    out += [f"VIEW_GPUS_{jid}={int(e['gpus'])}" for jid, e in state["elastic"].items() if jid.isdigit()]
    return "\n".join(out) + "\n"


def summary(state):
    for jid in sorted(state["elastic"], key=int):
        ev = [e for e in state["events"] if e["job"] == jid]
        gpus = sum(1 for e in ev if e["to_gpus"] != e["from_gpus"])
        batches = sum(1 for e in ev if e["batch_changed"])
        lo, hi = state["min_batch"].get(jid, 0), state["max_batch"].get(jid, 0)
        batch = f"batch {lo}" if lo == hi else f"batch {lo}..{hi}"
        print(f"  job {state['names'].get(jid, jid):<6} ({state['jobnames'].get(jid, '?')}): up to "
              f"{state['max'].get(jid, 0)} GPUs, {batch}; {gpus} GPU changes, {batches} batch changes")


def main(argv):
    if len(argv) >= 5 and argv[1] == "poll":
        state = load(argv[2])
        poll(state, argv[3], float(argv[4]))
        save(argv[2], state)
        with open(argv[2] + ".sh", "w") as f:
            f.write(facts(state))
    elif len(argv) == 3 and argv[1] == "summary":
        summary(load(argv[2]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
