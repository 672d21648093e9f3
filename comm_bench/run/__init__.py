"""A sweep from launch to the last record.

    sweep.py      what one rank does, from rendezvous to the last record
    spawn.py      the default launcher: N local ranks, watched, their failures named
    launch.py     who am I in this run (torchrun, Slurm, mpirun, PMIx, plain variables)
    check.py      `comm-bench check`: the collective first, then localize with pair sweeps
    confirm_phase.py  the confirm phase of a pair op, through pair_runner.PairRunner
    pair_runner.py    what the confirm phase needs of a run (the sweep, the simulator)
    resume.py     `sweep --resume`: what an interrupted document keeps
    limits.py     what this host can run (memory, GPUs) before a rank starts
    groups.py     where each host sits (the topology pattern's groups file)
    progress.py   progress on rank 0

May import every room below it: control/ (meeting), results/ (writing the document),
validate/ (the confirm phase), views/ (the stdout table), system/, and the vocabulary.
Nothing imports run/ except the CLI's commands/ and fabric_sim/ (the confirm phase, which
it drives through the PairRunner interface as a sweep does).
"""
