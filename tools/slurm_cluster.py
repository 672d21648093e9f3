#!/usr/bin/env python3
"""A real Slurm cluster on network-namespace hosts (needs root, iproute2, munge, slurmd, slurmctld).

Layout: N+1 named network-namespace hosts (tools/netns_hosts.py). Host 0, `head`, runs munged
(its own key and socket) and slurmctld, and is where srun/sbatch run. Hosts 1..N are the nodes
n1..nN, one slurmd each; a node's processes see its name as their host name, so ranks report
the Slurm node names. Nothing is written outside the work folder and /etc/netns/<namespace>.

    import slurm_cluster             # tools/ on sys.path
    with slurm_cluster.SlurmCluster(4, shape={3: "500mbit"}) as sc:
        sc.run(["srun", "-N", "4", "hostname"], capture_output=True, text=True)
    # every process in the cluster's namespaces is killed and the namespaces deleted here

CLI: python tools/slurm_cluster.py check 4     (up, srun hostname, down)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import netns_fabric
import netns_hosts

HEAD = "head"
NEEDED = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sbatch", "sinfo", "unshare")


def available():
    """(ok, reason): can a cluster be started here?"""
    missing = [b for b in NEEDED if not shutil.which(b)]
    if missing:
        return False, (f"{', '.join(missing)} not found: apt-get install munge slurmd slurmctld "
                       "slurm-client (tools/install.sh --test)")
    return netns_fabric.available()


def node_name(i):
    return f"n{i}"


class SlurmCluster:
    """n_nodes Slurm nodes n1..nN plus a head host; shape: {node_index (1-based): rate}."""

    def __init__(self, n_nodes, prefix="cbslurm", subnet="10.78.0", shape=None, cpus=2):
        self.n = int(n_nodes)
        self.hosts = netns_hosts.NamedHosts([HEAD, *self.nodes], prefix=prefix, subnet=subnet,
                                            shape={int(k): v for k, v in (shape or {}).items()})
        self.fabric = self.hosts.fabric
        self.cpus = cpus
        self.dir = None

    # --- queries -----------------------------------------------------------
    @property
    def nodes(self):
        return [node_name(i) for i in range(1, self.n + 1)]

    def addr(self, node):
        """Address of node 'nK' (or of the head)."""
        return self.hosts.addr(node)

    @property
    def conf(self):
        return str(self.dir / "slurm.conf")

    def env(self, **extra):
        env = dict(os.environ, SLURM_CONF=self.conf, **extra)
        for var in [k for k in env if k.startswith(("SLURM_", "SBATCH_", "SRUN_"))]:
            if var != "SLURM_CONF":   # this process may itself run inside a Slurm job
                env.pop(var)
        env.update(extra)
        return env

    def run(self, cmd, env=None, **kw):
        """subprocess.run(cmd) on the head host, talking to this cluster."""
        return self.hosts.run(0, cmd, env=env or self.env(), **kw)

    def logs(self):
        """The daemons' log tails, for a failing test's message."""
        out = []
        for f in sorted([*self.dir.glob("*.log"), *self.dir.glob("*.out")]) if self.dir else []:
            out.append(f"--- {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(out)

    # --- lifecycle ---------------------------------------------------------
    def up(self, timeout=90.0):
        self.dir = Path(tempfile.mkdtemp(prefix="cbslurm-"))
        self.hosts.up()
        try:
            self._start_munge()
            self._write_conf()
            self._daemon(0, ["slurmctld", "-D", "-c", "-i", "-f", self.conf])
            for i, node in enumerate(self.nodes, 1):
                self._daemon(i, ["slurmd", "-D", "-f", self.conf, "-N", node],
                             f"{_cgroup_mounts()} mount --bind {self.dir}/tmp-{node} {self.dir}/tmp &&")
            self._wait_idle(timeout)
        except BaseException:
            self.down()
            raise
        return self

    def _start_munge(self):
        key = self.dir / "munge.key"
        subprocess.run(["mungekey", "-c", "-k", str(key)], check=True, capture_output=True)
        os.chmod(key, 0o400)
        os.chmod(self.dir, 0o700)
        self.munge_socket = self.dir / "munge.sock"
        self._daemon(0, ["munged", "-F", "--force", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--pid-file={self.dir / 'munged.pid'}",
                               f"--log-file={self.dir / 'munged.log'}",
                               f"--seed-file={self.dir / 'munged.seed'}"])
        _wait(lambda: self.munge_socket.exists(), 20, "munged did not create its socket")

    def _write_conf(self):
        d = self.dir
        (d / "state").mkdir()
        (d / "tmp").mkdir()
        for n in self.nodes:
            (d / f"spool-{n}").mkdir()
            (d / f"tmp-{n}").mkdir()
        nodes = "\n".join(f"NodeName={n} NodeAddr={self.addr(n)} CPUs={self.cpus} State=UNKNOWN"
                          for n in self.nodes)
        (d / "slurm.conf").write_text(f"""\
ClusterName=cb
SlurmctldHost={HEAD}({self.addr(HEAD)})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
TmpFS={d}/tmp
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
MessageTimeout=30
KillWait=5
{nodes}
PartitionName=cb Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

    def _daemon(self, host, cmd, setup=""):
        """Start daemon cmd on host `host` (its output in <name>-<host>.out).
        A node's setup: `ip netns exec` mounts a fresh /sys, which hides the cgroup file
        systems that slurmd's cgroup plugin looks for (it loads it even with
        proctrack/linuxproc); and each node gets its own TmpFS (as real hosts have): two
        nodes' PMIx servers would otherwise share one folder per job step and collide."""
        with open(self.dir / f"{cmd[0]}-{host}.out", "wb") as log:
            self.hosts.popen(host, cmd, setup, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                             start_new_session=True)

    def _wait_idle(self, timeout):
        def idle():
            for p in self.hosts.procs:
                if p.poll() is not None:
                    raise netns_fabric.FabricError(f"a daemon exited ({p.args[-1]}):\n{self.logs()}")
            p = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True)
            states = dict(line.split() for line in p.stdout.splitlines() if line.strip())
            return len(states) == self.n and all(s == "idle" for s in states.values())
        _wait(idle, timeout, "the Slurm nodes did not all become idle", self.logs)

    def down(self):
        """Kill every process in the cluster's namespaces, then delete them and the files."""
        try:
            self.hosts.down()
        finally:
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False


def _cgroup_mounts():
    """Shell commands that mount this machine's cgroup file systems again (the same
    hierarchies) under the fresh /sys of `ip netns exec`."""
    cmds = []
    with open("/proc/self/mounts") as f:
        for line in f:
            src, path, fstype, opts = line.split()[:4]
            if path.startswith("/sys/fs/cgroup") and fstype in ("tmpfs", "cgroup", "cgroup2"):
                cmds.append(f"mkdir -p {path} && mount -t {fstype} -o {opts} {src} {path} &&")
    return " ".join(cmds)


def _wait(cond, timeout, what, detail=lambda: ""):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise netns_fabric.FabricError(f"{what} within {timeout:.0f}s\n{detail()}")
        time.sleep(0.3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ck = sub.add_parser("check", help="start a cluster, srun hostname on every node, stop it")
    ck.add_argument("n_nodes", type=int)
    a = ap.parse_args(argv)
    ok, why = available()
    if not ok:
        print(f"slurm_cluster: {why}", file=sys.stderr)
        return 2
    with SlurmCluster(a.n_nodes) as sc:
        p = sc.run(["srun", "-N", str(a.n_nodes), "--ntasks-per-node", "1", "hostname"],
                   capture_output=True, text=True, timeout=120)
        print(p.stdout + p.stderr, end="")
        return p.returncode


if __name__ == "__main__":
    sys.exit(main())
