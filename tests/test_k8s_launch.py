"""Kubernetes launch environments on network-namespace hosts: each pod is a host with the
hostname the operator gives it and exactly the variables the operator (or our manifest, for
what Kubernetes leaves to it) sets; names resolve as the kubelet's /etc/hosts and the
cluster DNS would answer them (here: /etc/hosts lines). A real tcp sweep must meet across
the pods, and validate must pass it. Needs root and iproute2 (docs/kubernetes.md).

Operators' sources: docs/kubernetes.md cites the file each variable and name comes from."""
import os
import subprocess
import time

import yaml

from cbtest import BIN, COMM_BENCH, load_results, run_cli
from netns_launch import MARKS, ROOT, netns_hosts

# Every pod's link shaped to one rate, as the netns fabric tests do: unshaped, the namespace
# links are CPU-bound (per-iteration max/median 6-7x on the 2-core CI machine) and a clean
# JobSet run was once named "unstable-host" (1.3x as unsteady as its references); what these
# tests check is the launch, on a fabric whose clean verdict is known (docs/benchmarks/false-alarms.md).
LINK = "2gbit"


def even(names):
    return {i: LINK for i in range(len(names))}

pytestmark = MARKS

NS = "default"
SWEEP = ["sweep", "-t", "tcp", "--pattern", "pairwise", "-b", "1M", "-e", "2M", "-f", "2", "-n", "10",
         "-w", "2", "--no-progress", "--timeout", "120", "-o", "k8s.json"]
DROP = ("RANK", "WORLD_SIZE", "MASTER_", "LOCAL_", "TORCHELASTIC", "COMM_BENCH", "JOB_", "JOBSET_", "PET_",
        "OMPI_", "PMI", "SLURM_", "KUBERNETES_")


def base_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROP)}
    # every pod of a cluster has the API server's Service in its environment
    env.update(PATH=f"{BIN}:{env['PATH']}", KUBERNETES_SERVICE_HOST="10.96.0.1", KUBERNETES_SERVICE_PORT="443")
    return env


def kube_hosts(h, fqdns, aliases=None, hidden=()):
    """Each pod's /etc/hosts: its own line as the kubelet writes it (IP, FQDN, hostname) and,
    standing in for the cluster DNS, the other pods' FQDNs and Service names (aliases[i]).
    Names in `hidden` are left out (a record not published yet)."""
    aliases = aliases or {}
    for i in range(len(h.names)):
        lines = ["127.0.0.1 localhost"]
        for j, name in enumerate(h.names):
            names = [fqdns[j]] + ([name] if j == i and fqdns[j] != name else []) + aliases.get(j, [])
            names = [n for n in names if n not in hidden]
            if names:
                lines.append(f"{h.addr(name)} {' '.join(names)}")
        # written in place: `ip netns exec` bind-mounts this file, a running pod sees the change
        with open(netns_hosts.ETC / h.fabric.netns(i) / "hosts", "r+") as f:
            f.truncate(0)
            f.write("\n".join(lines) + "\n")


def run_pods(h, envs, cwd, argv=None, order=None, before_last=None, timeout=400, codes=None):
    """Start pod i with envs[i] (in `order`), `before_last()` before the last one; wait for all:
    each exits 0 (or codes[i])."""
    order = order or list(range(len(envs)))
    procs = {}
    for n, i in enumerate(order):
        if n == len(order) - 1 and before_last:
            before_last()
        procs[i] = h.popen(i, argv or [COMM_BENCH, *SWEEP], env=envs[i], cwd=cwd,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logs = {i: p.communicate(timeout=timeout)[0] for i, p in procs.items()}
    for i, p in procs.items():
        assert p.returncode == (codes or {}).get(i, 0), f"pod {h.names[i]} exited {p.returncode}:\n" + \
            "\n=====\n".join(logs[j][-2000:] for j in sorted(logs))
    return logs


def met_and_valid(h, out, hosts_in_rank_order):
    """The sweep met across every pod (one rank each, in the operator's order) and validates."""
    doc = load_results(out)
    assert doc["status"] == "ok" and doc["world_size"] == len(hosts_in_rank_order)
    assert [(r["host"], r["addr"]) for r in doc["ranks"]] == [(n, h.addr(n)) for n in hosts_in_rank_order]
    n = len(hosts_in_rank_order)
    pairs = {(s, d) for s in range(n) for d in range(n) if s != d}
    assert {(r["src"], r["dst"]) for r in doc["results"] if "confirm" not in r} == pairs
    assert all(r["wrong"] == 0 for r in doc["results"])
    v = run_cli("validate", out, timeout=120)
    assert v.returncode == 0, v.stdout[-2000:] + v.stderr[-1000:]
    return doc


def test_indexed_job_with_headless_service(tmp_path):
    """An Indexed Job (hostname <job>-<index>, JOB_COMPLETION_INDEX) whose pods have
    `subdomain: <service>`; the manifest sets only WORLD_SIZE. Rank 0's address comes from
    the pod's own FQDN; pods that start before rank 0's record is published wait for it."""
    job, svc = "cbk", "cbk-svc"
    names = [f"{job}-{i}" for i in range(3)]
    fqdns = [f"{n}.{svc}.{NS}.svc.cluster.local" for n in names]
    with netns_hosts.NamedHosts(names, prefix="cbk8i", subnet="10.79.51", shape=even(names)) as h:
        kube_hosts(h, fqdns, hidden={fqdns[0]})          # rank 0's pod not running yet
        envs = [dict(base_env(), JOB_COMPLETION_INDEX=str(i), WORLD_SIZE="3") for i in range(3)]

        def rank0_starts():
            time.sleep(3)                                  # the others are waiting for the name now
            kube_hosts(h, fqdns)
        logs = run_pods(h, envs, tmp_path, order=[1, 2, 0], before_last=rank0_starts)
        assert f"waiting up to 600s for {fqdns[0]} to resolve" in logs[1]
        met_and_valid(h, tmp_path / "k8s.json", names)


def test_jobset(tmp_path):
    """A JobSet of one replicated job, 2 jobs x 2 pods (<jobset>-<rjob>-<jobidx>-<podidx>,
    subdomain = the JobSet's name), its annotations exposed through the downward API."""
    js, rjob = "cbjs", "workers"
    names = [f"{js}-{rjob}-{j}-{p}" for j in range(2) for p in range(2)]
    fqdns = [f"{n}.{js}.{NS}.svc.cluster.local" for n in names]
    with netns_hosts.NamedHosts(names, prefix="cbk8j", subnet="10.79.52", shape=even(names)) as h:
        kube_hosts(h, fqdns)
        envs = []
        for name in names:
            j, p = name.split("-")[-2:]
            envs.append(dict(base_env(), JOB_COMPLETION_INDEX=p, JOBSET_NAME=js, JOBSET_REPLICATEDJOB_NAME=rjob,
                             JOBSET_JOB_INDEX=j, JOBSET_JOB_GLOBAL_INDEX=j, JOBSET_REPLICATEDJOB_REPLICAS="2",
                             JOBSET_GLOBAL_REPLICAS="2", WORLD_SIZE="4"))
        run_pods(h, envs, tmp_path, order=[3, 1, 2, 0])
        met_and_valid(h, tmp_path / "k8s.json", names)


def pytorchjob_env(rank, n, nproc="auto"):
    """What training-operator v1.9 (pkg/controller.v1/pytorch/envvar.go, master.go) sets for
    a job with a Master replica and n-1 Workers, container port 23456."""
    return dict(base_env(), PYTHONUNBUFFERED="1", MASTER_PORT="23456", PET_MASTER_PORT="23456",
                MASTER_ADDR="cbpj-master-0", PET_MASTER_ADDR="cbpj-master-0",
                WORLD_SIZE=str(n * (int(nproc) if nproc.isdigit() else 1)), RANK=str(rank),
                PET_NODE_RANK=str(rank), PET_NPROC_PER_NODE=nproc, PET_NNODES=str(n))


def test_pytorchjob(tmp_path):
    """A PyTorchJob: pods named <job>-master-0, <job>-worker-<i>; MASTER_ADDR is the master's
    per-replica headless Service <job>-master-0 (resolved through the namespace's DNS)."""
    names = ["cbpj-master-0", "cbpj-worker-0", "cbpj-worker-1"]
    with netns_hosts.NamedHosts(names, prefix="cbk8p", subnet="10.79.53", shape=even(names)) as h:
        kube_hosts(h, names)      # a pod name resolves as its Service's name
        envs = [pytorchjob_env(i, 3) for i in range(3)]
        run_pods(h, envs, tmp_path, order=[2, 1, 0])
        met_and_valid(h, tmp_path / "k8s.json", names)
        # nprocPerNode 2 started directly: one line, exit 2, before any rank waits
        p = h.run(1, [COMM_BENCH, *SWEEP], env=pytorchjob_env(1, 3, "2"), cwd=tmp_path,
                  capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "nprocPerNode 2" in p.stderr and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_pytorchjob_nproc_per_node_under_torchrun(tmp_path):
    """nprocPerNode 2: each pod runs torchrun, which takes its settings from the PET_*
    variables the operator set (torch.distributed.run reads PET_<OPTION>)."""
    names = ["cbpj-master-0", "cbpj-worker-0"]
    with netns_hosts.NamedHosts(names, prefix="cbk8t", subnet="10.79.54", shape=even(names)) as h:
        kube_hosts(h, names)
        envs = [pytorchjob_env(i, 2, "2") for i in range(2)]
        argv = [BIN / "torchrun", "--no-python", COMM_BENCH, *SWEEP]
        run_pods(h, envs, tmp_path, argv=argv, order=[1, 0])
        doc = load_results(tmp_path / "k8s.json")
        assert doc["status"] == "ok" and doc["world_size"] == 4
        assert sorted((r["host"], r["local_rank"]) for r in doc["ranks"]) == \
            [(n, lr) for n in names for lr in (0, 1)]


def test_mpijob(tmp_path):
    """An MPIJob (mpi-operator v2beta1): the launcher pod runs mpirun over the hostfile the
    operator writes (<job>-worker-<i>.<job>.<ns>.svc slots=N) with the operator's OMPI_* and
    K_MPI_JOB_ROLE variables; mpirun reaches the workers through ssh (here tools/netns_rsh)."""
    job, n = "cbmj", 3
    workers = [f"{job}-worker-{i}" for i in range(n)]
    names = [f"{job}-launcher", *workers]
    fqdns = [f"{x}.{job}.{NS}.svc" for x in names]      # the operator's domainFormat "%s.%s.%s.svc"
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{f} slots=1\n" for f in fqdns[1:]))
    ssh = tmp_path / "ssh"      # sshd answers to the FQDN; the pod's own hostname stays short
    ssh.write_text('#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do [ "$1" = -o ] && shift; shift; done\n'
                   f'h=$1; shift; exec {ROOT / "tools" / "netns_rsh"} "${{h%%.*}}" "$@"\n')
    ssh.chmod(0o755)
    with netns_hosts.NamedHosts(names, prefix="cbk8m", subnet="10.79.55", shape=even(names)) as h:
        kube_hosts(h, fqdns)
        env = dict(base_env(), K_MPI_JOB_ROLE="launcher", OMPI_MCA_orte_keep_fqdn_hostnames="true",
                   OMPI_MCA_orte_default_hostfile="/etc/mpi/hostfile",
                   OMPI_MCA_plm_rsh_args="-o ConnectionAttempts=10", OMPI_MCA_orte_set_default_slots="1",
                   NETNS_HOSTS=h.map_file, PRTE_MCA_plm_ssh_agent=str(ssh),
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        # /etc/mpi is the ConfigMap's mount in the launcher pod; here the same file elsewhere
        argv = [BIN / "mpirun", "--hostfile", hostfile, "-np", str(n), "-x", "PATH", COMM_BENCH, *SWEEP]
        run_pods(h, [env], tmp_path, argv=argv, order=[0])
        met_and_valid(h, tmp_path / "k8s.json", workers)


def chart_pods(tmp_path, values, prefix, subnet, shape=None, codes=None, ranks_per_pod=1):
    """The Helm chart's Indexed Job as rendered (Helm's engine, helm-python-sdk): each pod runs
    the image's comm-bench-pod (examples/kubernetes/comm-bench-pod.sh) with the rendered env, the downward
    API's values filled in (node<i>, a uid). Returns (names, the run's folder, logs)."""
    from helm_python import chart as helm_chart

    rendered = helm_chart.Chart.load(ROOT / "examples" / "kubernetes" / "helm" / "comm-bench").render(values, name="cbh", namespace=NS)
    docs = [d for text in rendered.values() for d in yaml.safe_load_all(text) if d]
    job = next(d for d in docs if d["kind"] == "Job")
    svc = next(d for d in docs if d["kind"] == "Service")["metadata"]["name"]
    name = job["metadata"]["name"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["comm-bench-pod"]
    results = tmp_path / "results"            # the PVC's mount, /results in the pod
    names = [f"{name}-{i}" for i in range(values["nodes"])]
    fqdns = [f"{n}.{svc}.{NS}.svc.cluster.local" for n in names]

    def pod_env(i):
        env = dict(base_env(), JOB_COMPLETION_INDEX=str(i), CB_OUT=str(results))
        for e in container["env"]:
            field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            env[e["name"]] = e["value"] if field is None else \
                {"spec.nodeName": f"node{i}"}.get(field, "3f6d-uid" if "controller-uid" in field else None)
        return env
    with netns_hosts.NamedHosts(names, prefix=prefix, subnet=subnet, shape=even(names) | (shape or {})) as h:
        # <pod>.<service>: the short name that the pods' DNS search path completes
        kube_hosts(h, fqdns, {i: [f"{n}.{svc}"] for i, n in enumerate(names)})
        logs = run_pods(h, [pod_env(i) for i in range(len(names))], tmp_path,
                        argv=[ROOT / "examples" / "kubernetes" / "comm-bench-pod.sh"], order=list(range(len(names)))[::-1],
                        codes=codes)
        run = results / "latest"
        assert os.readlink(run) == "3f6d-uid"
        for f in ("comm-bench.json", "validate.xml", "heatmap.html"):
            assert (run / f).stat().st_size > 0, f
        doc = load_results(run / "comm-bench.json")
        assert sorted((r["host"], r["addr"]) for r in doc["ranks"]) == \
            sorted((n, h.addr(n)) for n in names for _ in range(ranks_per_pod))
    assert [(run / "nodes" / f"node{i}").read_text().strip() for i in range(len(names))] == names
    return names, run, logs


SMALL = {"sizes": {"min": "1M", "max": "2M", "factor": 2}, "iters": 10}


def test_the_charts_pods_sweep_validate_and_draw(tmp_path):
    """A clean run: every pod exits 0 (rank 0's: validate's pass); the node map lets
    `validate --node-problem` answer for a Kubernetes node."""
    names, run, _ = chart_pods(tmp_path, {"nodes": 3, **SMALL, "output": {"pvc": "comm-bench-results"}},
                               "cbk8h", "10.79.56")
    assert run_cli("validate", run / "comm-bench.json", timeout=120).returncode == 0
    v = run_cli("validate", run / "comm-bench.json", "--node-problem", (run / "nodes" / "node1").read_text().strip())
    assert v.returncode == 0 and v.stdout == f"comm-bench: {names[1]} ok\n", (v.stdout, v.stderr)
    v = run_cli("validate", run / "comm-bench.json", "--node-problem", "node-elsewhere")
    assert v.returncode == 2 and len(v.stdout.splitlines()) == 1 and "not in these results" in v.stdout


def test_the_charts_job_fails_with_validate_on_a_slow_node(tmp_path):
    """One node's link shaped to a fraction of the others': rank 0's pod exits 1 (validate's
    findings), so the Job fails; with no PVC it prints the document to its log; the NPD
    verdict names that node as a problem and the others as ok."""
    names, run, logs = chart_pods(tmp_path, {"nodes": 4, **SMALL}, "cbk8s", "10.79.57",
                                  shape={2: "500mbit"}, codes={0: 1})
    assert "# comm-bench results document" in logs[0] and '"results"' in logs[0]
    verdicts = []
    for i in range(4):
        host = (run / "nodes" / f"node{i}").read_text().strip()
        v = run_cli("validate", run / "comm-bench.json", "--node-problem", host)
        assert len(v.stdout.splitlines()) == 1, v.stdout
        verdicts.append(v.returncode)
    assert verdicts == [0, 0, 1, 0], verdicts
    assert (run / "bad-nodes.txt").read_text().split("\t")[0] == names[2]


def test_the_charts_gpus_per_node_runs_torchrun_in_each_pod(tmp_path):
    """gpusPerNode 2: each pod's comm-bench-pod runs torchrun (static rendezvous at the
    chart's MASTER_ADDR <job>-0.<service>) with 2 ranks; 2 pods make one run of 4 ranks
    (tcp here: no GPU on this machine, the GPU request is only in the manifest)."""
    _, run, _ = chart_pods(tmp_path, {"nodes": 2, "gpusPerNode": 2, **SMALL, "output": {"pvc": "r"}},
                           "cbk8g", "10.79.58", ranks_per_pod=2)
    doc = load_results(run / "comm-bench.json")
    assert doc["status"] == "ok" and doc["world_size"] == 4
    assert sorted(r["local_rank"] for r in doc["ranks"]) == [0, 0, 1, 1]
