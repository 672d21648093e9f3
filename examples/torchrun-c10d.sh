#!/bin/bash
# A pairwise TCP sweep across NODES hosts under torchrun's c10d rendezvous: run this same
# line on every host (one torchrun agent per host), e.g. on each of 4 hosts:
#     examples/torchrun-c10d.sh node0 4 /shared/torchrun.json
# HEAD: a host every agent reaches (it hosts the rendezvous store on port 29400).
# If a rank dies, the agents restart the group once (--max-restarts 1) and --resume makes
# comm-bench continue the same results document: what it holds is not measured again, and
# its `resumed` list says after what record the restart continued.
# tests/test_torchrun_c10d.py runs this file as it is, one agent per network-namespace host.
set -euo pipefail
head=$1 nodes=$2 out=${3:-torchrun.json}
exec torchrun --nnodes "$nodes" --nproc-per-node 1 --rdzv-backend c10d \
    --rdzv-endpoint "$head:29400" --rdzv-id "comm-bench-$nodes-$head" --max-restarts 1 \
    --no-python comm-bench sweep -t tcp --pattern pairwise -b 64K -e 4M -n 20 -w 2 \
    --timeout 30 --no-progress --resume -o "$out"
