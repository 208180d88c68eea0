"""The torch job's state across a relaunch (docs/runtime.md, "Relaunch"): where the MPI runtime
cannot change the world in place, the world stops at a rescale point and elastic-launch starts it
again over the new nodes. The runtime carries its own registered state and progress; the torch
job's state (model, optimizer, scheduler, scaler, sampler position, step, learning-rate factor,
random generators, extras: Job.state_dict()) is not registered with it, so it goes beside:

* the old world's rank 0, at the rescale point that stopped the world for a relaunch (the
  session's last change is a "relaunch" that was done and the session says stop), writes it with
  torch.save to RUN_DIR/relaunch.torch (through a temporary file and a rename) before its process
  ends; a failure to write raises, so that the rank ends non-zero and the launcher keeps the
  runtime's state as the job's checkpoint instead of starting a world without the torch state;
* the new world's rank 0 (the session says relaunched) reads it, every rank receives it from rank
  0 as newcomers do (handover.broadcast), loads it (Job.load_state_dict, random generators
  included), and rank 0 removes the file. When rank 0 cannot read it (missing, truncated, not a
  torch file), every rank ends with elastic_mpi.EXIT_WORLD_LOST (75) after rank 0 printed why: the
  world's state did not come through, so elasticd requeues the job and it resumes from its own
  last checkpoint, as after any broken world (the runtime's state, already taken by this world,
  does not hold the model).

RUN_DIR is the job's run directory (ELASTIC_RUN_DIR, which elastic-launch sets; the relaunch
record lies there). The file is on disk, not in memory: a relaunch that does not complete leaves
no memory held, and the next relaunch writes it anew.
"""

import os
import sys

import numpy as np
import torch

import elastic_mpi

from . import handover

FILE = "relaunch.torch"


def _run_dir(session):
    """The run directory of this world: the record's (ELASTIC_RELAUNCH_FROM) in a relaunched
    world, else ELASTIC_RUN_DIR."""
    record = os.environ.get("ELASTIC_RELAUNCH_FROM", "") if session.relaunched else ""
    run_dir = os.path.dirname(record) if record else os.environ.get("ELASTIC_RUN_DIR", "")
    if not run_dir:
        raise RuntimeError("elastic_mpi.torch: a relaunch needs the job's run directory (ELASTIC_RUN_DIR, set by "
                           "elastic-launch)")
    return run_dir


def stopped_for_relaunch(session):
    """True when the rescale point that just returned stopped this world for a relaunch."""
    last = session.last_rescale
    return session.should_stop and not session.left and last["what"] == "relaunch" and last["ok"]


def hand_over(job):
    """Rank 0 of a world stopping for a relaunch: the job's state to RUN_DIR/relaunch.torch."""
    if job.session.rank != 0:
        return
    run_dir = _run_dir(job.session)
    if not os.path.exists(os.path.join(run_dir, "relaunch.json")):
        return  # the runtime wrote no record: no world starts after this one
    path = os.path.join(run_dir, FILE)
    tmp = path + ".tmp"
    try:
        torch.save(job.state_dict(), tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def take(job):
    """Every rank of a relaunched world (collective): the state the world before it left, loaded."""
    session = job.session
    state = None
    error = None
    if session.rank == 0:
        path = os.path.join(_run_dir(session), FILE)
        try:
            # The job's own file (its private run dir), from rank 0 of the world before: the same
            # program. weights_only=False: it holds the generators' states and the user's extras.
            state = torch.load(path, map_location=job.device, weights_only=False)
        except FileNotFoundError:
            error = (f"elastic_mpi.torch: this world was relaunched but {path} is missing: the world before it did "
                     "not hand its torch state over (was it an elastic_mpi.torch job?)")
        except Exception as e:  # noqa: BLE001 (any unreadable file: every rank must hear of it)
            error = f"elastic_mpi.torch: cannot read the relaunch state {path}: {e}"
    # Rank 0's verdict to every rank first, so that none waits in the hand-over for a state that
    # will not come.
    verdict = np.zeros(1, dtype=np.float64)
    verdict[0] = 1.0 if session.rank == 0 and error is not None else 0.0
    session.allreduce(verdict)
    if verdict[0] > 0:
        print(error if session.rank == 0 else "elastic_mpi.torch: rank 0 could not read the relaunch state (see its "
                                              "error)", file=sys.stderr, flush=True)
        if session.rank == 0:
            print(f"elastic_mpi.torch: the world's state did not come through: exit {elastic_mpi.EXIT_WORLD_LOST} "
                  "(elasticd requeues the job; it resumes from its last checkpoint)", file=sys.stderr, flush=True)
        raise SystemExit(elastic_mpi.EXIT_WORLD_LOST)
    state = handover.broadcast(session, state, receiving=session.rank != 0)
    job.load_state_dict(state)
    if session.rank == 0:
        os.unlink(os.path.join(_run_dir(session), FILE))
