"""Driver of python.ddp_launch_*: the unmodified DDP example (elastic_mpi/python/examples/train_ddp.py,
init_process_group("gloo") from torchrun's environment) under elastic-launch on this machine.

one_node     one launch of 2 ranks (mpirun and the rank shim): the world has 2 ranks, the training
             loss falls, both ranks end with the same model (the same final loss on the whole data
             set); a run stopped after 3 epochs and started again resumes from its snapshot at
             epoch 3 and ends with the final loss of the run that was never stopped.
node_groups  two launches standing for two nodes of one job (node group 0 with 2 ranks, node group
             1 with 1 rank, one run dir): they train as one world of 3 ranks, ranks 0..2, which end
             with the same model.

usage: run_ddp_launch.py one_node|node_groups BIN EXAMPLE
"""

import os
import re
import subprocess
import sys
import tempfile

EPOCHS = 6
# The ranks of one node share mpirun's output: a line of one rank may follow another's text
# before its newline, so lines are found anywhere, not only at a line start.
FINAL = re.compile(r"\[rank (\d+)\] world size (\d+) \| final loss ([0-9.]+) \| accuracy ([0-9]\.[0-9]{4})")
EPOCH = re.compile(r"\[rank 0\] epoch (\d+) \| [^\n\[]* \| train loss ([0-9]+\.[0-9]{6})")
RESUMED = re.compile(r"\[rank (\d+)\] resuming training from snapshot at epoch (\d+)")


LAUNCH_TIMEOUT_S = 60  # one launch takes 2-4 s here
started = []  # every launcher, stopped on the way out


def stop_all():
    """SIGTERM to launchers still running (each forwards it to its ranks and stops its
    ompi-server), SIGKILL after 5 s."""
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def fail(message, out=""):
    stop_all()
    sys.exit(f"FAIL: {message}\n{out[-4000:]}")


def launch(launcher, example, work, run_dir, ranks, args, group=None, groups=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", ELASTIC_JOB_ID=f"ddp{os.getpid()}")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(k, None)
    if groups is not None:
        env.update(ELASTIC_NODE_GROUP=str(group), ELASTIC_NODE_GROUPS=str(groups))
    cmd = [launcher, "-n", str(ranks), "--oversubscribe", "--run-dir", run_dir, "--",
           sys.executable, "-B", example] + args
    print(" ".join(cmd), flush=True)
    started.append(subprocess.Popen(cmd, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True))
    return started[-1]


def finish(proc, what):
    try:
        out, _ = proc.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop_all()
        out, _ = proc.communicate()
        fail(f"{what} did not end within {LAUNCH_TIMEOUT_S} s", out)
    print(out, flush=True)
    if proc.returncode != 0:
        fail(f"{what} exited with {proc.returncode}", out)
    return out


def check_world(out, world, epochs_run):
    """The ranks 0..world-1 report the same final loss; the loss fell; returns the final loss."""
    finals = FINAL.findall(out)
    ranks = sorted(int(r) for r, *_ in finals)
    if ranks != list(range(world)):
        fail(f"expected final lines of ranks 0..{world - 1}, got {ranks}", out)
    if {int(w) for _, w, _, _ in finals} != {world}:
        fail(f"a rank saw another world size than {world}", out)
    if len({(loss, acc) for _, _, loss, acc in finals}) != 1:
        fail("the ranks end with different models: " + str(finals), out)
    if f"world size {world} | backend gloo" not in out:
        fail(f"rank 0 did not report world size {world} over gloo", out)
    epochs = [(int(e), float(l)) for e, l in EPOCH.findall(out)]
    if [e for e, _ in epochs] != list(epochs_run):
        fail(f"expected epochs {list(epochs_run)}, got {[e for e, _ in epochs]}", out)
    final = float(finals[0][2])
    if epochs and epochs_run[0] == 0 and not (epochs[-1][1] < 0.5 * epochs[0][1] and final < epochs[0][1]):
        fail(f"the loss did not fall: epochs {epochs}, final {final}", out)
    print(f"world {world}: train loss {epochs[0][1] if epochs else '-'} -> {epochs[-1][1] if epochs else '-'}, "
          f"final loss {final}, the same on every rank", flush=True)
    return final


def one_node(launcher, example, work):
    run_dir = os.path.join(work, "run")
    whole = os.path.join(work, "whole.pt")
    out = finish(launch(launcher, example, work, run_dir, 2, ["--epochs", str(EPOCHS), "--snapshot-path", whole]),
                 "the 2-rank run")
    reference = check_world(out, 2, range(EPOCHS))
    if not os.path.exists(whole):
        fail("no snapshot written", out)

    # Stopped after 3 epochs (its snapshot then), started again for all of them.
    snap = os.path.join(work, "snapshot.pt")
    first = ["--epochs", "3", "--save-every", "3", "--snapshot-path", snap]
    check_world(finish(launch(launcher, example, work, run_dir, 2, first), "the first part"), 2, range(3))
    out = finish(launch(launcher, example, work, run_dir, 2, ["--epochs", str(EPOCHS), "--snapshot-path", snap]),
                 "the resumed run")
    resumed = sorted((int(r), int(e)) for r, e in RESUMED.findall(out))
    if resumed != [(0, 3), (1, 3)]:
        fail(f"both ranks should resume at epoch 3, got {resumed}", out)
    final = check_world(out, 2, range(3, EPOCHS))
    # Same world, same data order (the sampler's seed and epoch), the optimizer's momentum and the
    # scheduler restored: the same arithmetic, so the same model (printed to 6 decimals).
    if abs(final - reference) > 1e-6:
        fail(f"the resumed run ends at loss {final}, the uninterrupted one at {reference}", out)
    print(f"resumed at epoch 3: final loss {final} = {reference} of the uninterrupted run")


def node_groups(launcher, example, work):
    run_dir = os.path.join(work, "run")
    args = ["--epochs", "4", "--snapshot-path", os.path.join(work, "snapshot.pt")]
    g0 = launch(launcher, example, work, run_dir, 2, args, group=0, groups=2)
    g1 = launch(launcher, example, work, run_dir, 1, args, group=1, groups=2)
    out = finish(g0, "node group 0") + finish(g1, "node group 1")
    check_world(out, 3, range(4))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("one_node", "node_groups"):
        sys.exit(__doc__)
    mode, bin_dir, example = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    with tempfile.TemporaryDirectory(prefix="elastic-ddp.") as work:
        {"one_node": one_node, "node_groups": node_groups}[mode](os.path.join(bin_dir, "elastic-launch"), example, work)
    print("PASS")


if __name__ == "__main__":
    main()
