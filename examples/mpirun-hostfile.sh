#!/bin/bash
# A pairwise sweep over the hosts of an Open MPI hostfile, one rank per host:
#     examples/mpirun-hostfile.sh examples/hostfile tcp      (or mpi, rdma, gloo, ...)
# Run it from a folder every host sees: rank 0 writes mpirun-<transport>.json there.
# mpirun starts its daemons on the other hosts through ssh; tests/test_mpirun_hosts.py runs
# this file as it is, with tools/netns_rsh standing in for ssh (PRTE_MCA_plm_ssh_agent).
set -euo pipefail
hostfile=$1 transport=${2:-tcp}
np=$(grep -c '^[^#[:space:]]' "$hostfile")
exec mpirun --hostfile "$hostfile" -np "$np" --map-by node \
    comm-bench sweep -t "$transport" --pattern pairwise -b 64K -e 1M -f 4 -n 10 -w 2 \
    --no-progress -o "mpirun-$transport.json"
