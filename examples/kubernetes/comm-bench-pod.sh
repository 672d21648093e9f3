#!/bin/sh
# One pod's part of a comm-bench run on Kubernetes (installed in the image as comm-bench-pod;
# the manifests in examples/kubernetes/k8s and the Helm chart run it; docs/kubernetes.md):
#   every pod: comm-bench sweep (one rank, or CB_GPUS_PER_POD ranks under torchrun);
#   the pod of rank 0, after the sweep: validate (its exit code is the pod's) and the heatmap.
# Settings (the manifest's env):
#   CB_TRANSPORT tcp | nccl | rdma | gloo | mpi ...     CB_PATTERN pairwise | ring | ...
#   CB_SIZES "-b 1M -e 64M -f 2"                        CB_EXTRA more sweep options
#   CB_GPUS_PER_POD 1 (more: torchrun --nproc-per-node, with WORLD_SIZE = pods and MASTER_ADDR set)
#   CB_OUT /results: a PVC every pod mounts (or an emptyDir with CB_STDOUT=1: rank 0 prints
#   the results document to its log after a "# comm-bench results document" line)
#   CB_RUN_ID (the Job's or JobSet's uid label): this run's folder $CB_OUT/<id>; rank 0 points
#   $CB_OUT/latest at it when done
#   NODE_NAME (downward API spec.nodeName): recorded as <run>/nodes/<node> = this pod's
#   hostname, which the Node Problem Detector plugin reads (examples/kubernetes/k8s/npd-daemonset.yaml)
set -u
transport=${CB_TRANSPORT:-tcp} pattern=${CB_PATTERN:-pairwise} sizes=${CB_SIZES:--b 1M -e 64M -f 2}
root=${CB_OUT:-/results} gpus=${CB_GPUS_PER_POD:-1}
out="$root/${CB_RUN_ID:-run}" doc="$root/${CB_RUN_ID:-run}/comm-bench.json"
mkdir -p "$out/nodes" || exit 2
[ -n "${NODE_NAME:-}" ] && hostname > "$out/nodes/$NODE_NAME"

# rank 0's pod: an Indexed Job's index 0 (of global job 0 in a JobSet), or RANK 0 (PyTorchJob)
lead=0
if [ "${JOB_COMPLETION_INDEX:-}" = 0 ] && [ "${JOBSET_JOB_GLOBAL_INDEX:-${JOBSET_JOB_INDEX:-0}}" = 0 ]; then lead=1; fi
if [ -z "${JOB_COMPLETION_INDEX:-}" ] && [ "${PET_NODE_RANK:-${RANK:-}}" = 0 ]; then lead=1; fi

# --resume: a pod restarted by the Job (backoffLimit) continues the same document
set -- sweep -t "$transport" --pattern "$pattern" $sizes ${CB_EXTRA:-} --no-progress --resume -o "$doc"
if [ "$gpus" -gt 1 ]; then
  : "${MASTER_ADDR:?CB_GPUS_PER_POD > 1 runs torchrun: set MASTER_ADDR to rank 0's pod name}"
  torchrun --nnodes "${PET_NNODES:-${WORLD_SIZE:?set WORLD_SIZE to the number of pods}}" \
    --nproc-per-node "$gpus" --node-rank "${JOB_COMPLETION_INDEX:-${PET_NODE_RANK:-0}}" \
    --master-addr "$MASTER_ADDR" --master-port "${MASTER_PORT:-29500}" --no-python comm-bench "$@"
else
  comm-bench "$@"
fi
rc=$?
[ $lead = 1 ] || exit $rc
[ $rc = 0 ] || [ -s "$doc" ] || exit $rc
comm-bench validate "$doc" --junit "$out/validate.xml" --drain-list "$out/bad-nodes.txt" \
  --prometheus "$out/comm-bench.prom" ${CB_RULES:+--rules "$CB_RULES"}
verdict=$?
comm-bench heatmap "$doc" -o "$out/heatmap.html" || echo "comm-bench-pod: heatmap failed (the verdict stands)" >&2
ln -sfn "${CB_RUN_ID:-run}" "$root/latest"
if [ "${CB_STDOUT:-0}" = 1 ]; then
  echo "# comm-bench results document"
  cat "$doc"
fi
[ $rc = 0 ] || exit $rc
exit $verdict
