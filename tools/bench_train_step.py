#!/usr/bin/env python3
"""Measured framework training steps (the "lightweight evidence first" DDP/FSDP baseline)
against which `comm-bench select` predictions are checked (tools/compare_select.py).

One process per GPU, launched by torchrun; a synthetic transformer-like stack of
bias-free nn.Linear layers (per layer qkv h->3h, proj h->h, fc1 h->4h, fc2 4h->h:
12 h^2 parameters, so params = 12 x layers x hidden^2), parameters and gradients in bf16.
Per size and strategy it measures, after --warmup steps, over --steps timed steps
(torch.cuda.synchronize around each step):

  compute_s      the same model with no wrapper, no communication (the local step)
  step_s         the full step: DDP (bucket_cap_mb --bucket-mb) / FSDP (fully_shard per
                 layer, FULL_SHARD: reshard after forward)
  nosync_step_s  DDP under no_sync(); FSDP with set_requires_gradient_sync(False)
                 (still all-gathers parameters: no reduce-scatter)
  solo_step_s    FSDP only: the same FSDP step with each rank in a mesh of its own (one
                 rank): the wrapper's copies, hooks and launches stay, the link goes
  comm_cost_s    what communication adds to the step, from steps with and without it:
                 DDP step_s - nosync_step_s, FSDP step_s - solo_step_s
  comm_kernel_s  the NCCL kernel time per step, summed from torch.profiler over
                 --profile-steps steps (mean over ranks)
  comm_kernel_min_s  the same kernels matched by position across ranks, each taken on
                 the rank where it was shortest: the rank that arrived last waited least,
                 so this drops the time a kernel spins for a late peer
  exposed_comm_s step_s - compute_s (communication not hidden by compute)

--serialize sets CUDA_LAUNCH_BLOCKING=1 before CUDA starts: every kernel launch returns
only when the kernel has finished, so no kernel runs beside another. An NCCL kernel's
duration is then its transfer time alone (with comm_kernel_min_s, the last rank's, which
did not wait), for exactly the collectives the framework issued: the figure an isolated
sweep can predict. (CUDA_DEVICE_MAX_CONNECTIONS=1 was tried first: it orders launches on
one hardware queue but a GEMM still runs beside an NCCL kernel whose blocks are placed,
and the kernels read as long as without it.) Step times of a serialized run are not
training step times.

    torchrun --nproc-per-node 2 tools/bench_train_step.py --params 350M,1B,2B -o train.json
    torchrun --nproc-per-node 2 tools/bench_train_step.py --serialize -o train_serial.json
    python tools/bench_train_step.py --device cpu --params 2M --layers 2   # gloo, CPU
    python tools/bench_train_step.py --dry-run --params 1B                 # shapes only

Needs only torch (and numpy through torch); no network.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import statistics
import sys
import time

# NVLink multicast stays off wherever this runs (shared machines).
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_count(text):
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMGBT]?)\s*$", str(text), re.I)
    if not m:
        raise SystemExit(f"bench_train_step: bad parameter count {text!r} (use e.g. 350M, 1.5B)")
    return int(float(m.group(1)) * SUFFIX[m.group(2).upper()])


def shape_for(params, layers, hidden=None, multiple=128):
    """(layers, hidden, exact params) of the stack closest to `params` (12 L h^2)."""
    if hidden is None:
        hidden = max(multiple, int(round(math.sqrt(params / (12.0 * layers)) / multiple)) * multiple)
    return layers, hidden, 12 * layers * hidden * hidden


def build_model(torch, layers, hidden, dtype, device):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
            self.proj = nn.Linear(hidden, hidden, bias=False)
            self.fc1 = nn.Linear(hidden, 4 * hidden, bias=False)
            self.fc2 = nn.Linear(4 * hidden, hidden, bias=False)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            x = x + self.proj(q * torch.sigmoid(k) + v)   # attention-free token mixing
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Block() for _ in range(layers))

        def forward(self, x):
            for b in self.layers:
                x = b(x)
            return x

    torch.manual_seed(0)
    model = Stack().to(device=device, dtype=dtype)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.02 / math.sqrt(max(1, layers)))
    return model


class Bench:
    def __init__(self, args):
        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.args = torch, dist, args
        self.cuda = args.device == "cuda"
        if "WORLD_SIZE" not in os.environ:        # plain `python`: a world of one
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                              MASTER_PORT=str(_free_port()))
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if self.cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        dist.init_process_group("nccl" if self.cuda else "gloo",
                                **({"device_id": self.device} if self.cuda else {}))
        self.dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def timed(self, step, n):
        out = []
        for _ in range(n):
            self.sync()
            t0 = time.perf_counter()
            step()
            self.sync()
            out.append(time.perf_counter() - t0)
        return out

    def measure(self, step, prof=False):
        """(median step seconds, (mean, min-over-ranks) comm kernel seconds per step or None)."""
        a = self.args
        self.timed(step, a.warmup)
        times = self.timed(step, a.steps)
        comm = self.profile_comm(step) if prof and a.profile_steps > 0 else None
        return statistics.median(times), comm

    def profile_comm(self, step):
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        with profile(activities=acts) as prof:
            self.timed(step, self.args.profile_steps)
        mine = comm_durations_us(prof, self.cuda)
        if self.args.kernels_out:           # every communication kernel, for a closer look
            with open(f"{self.args.kernels_out}.rank{self.rank}.json", "a", encoding="utf-8") as f:
                f.write(json.dumps(comm_kernels(prof, self.cuda)) + "\n")
        everyone = [None] * self.world
        self.dist.all_gather_object(everyone, mine)
        n = self.args.profile_steps
        return sum(mine) / 1e6 / n, min_over_ranks_us(everyone) / 1e6 / n

    def mean_max(self, value):
        """(mean, max) of a float over ranks."""
        t = self.torch.tensor([value, value], dtype=self.torch.float64, device=self.device)
        s = t.clone()
        self.dist.all_reduce(s[:1])
        self.dist.all_reduce(t[1:], op=self.dist.ReduceOp.MAX)
        return float(s[0]) / self.world, float(t[1])

    def batch(self, hidden):
        a = self.args
        g = self.torch.Generator(device="cpu").manual_seed(1 + self.rank)
        x = self.torch.randn(a.micro_batch, a.seq_len, hidden, generator=g)
        return x.to(device=self.device, dtype=self.dtype)

    def step_fn(self, model, opt, x, ctx=None):
        def step():
            opt.zero_grad(set_to_none=True)
            if ctx is not None:
                with ctx():
                    model(x).float().pow(2).mean().backward()
            else:
                model(x).float().pow(2).mean().backward()
            opt.step()
        return step

    def sgd(self, model):
        return self.torch.optim.SGD(model.parameters(), lr=1e-6)

    def run_size(self, params):
        torch, a = self.torch, self.args
        layers, hidden, exact = shape_for(params, a.layers, a.hidden)
        x = self.batch(hidden)
        case = {"params": exact, "layers": layers, "hidden": hidden, "strategies": {}}
        # local compute: no wrapper, no communication
        model = build_model(torch, layers, hidden, self.dtype, self.device)
        compute, _ = self.measure(self.step_fn(model, self.sgd(model), x))
        compute_mean, compute_max = self.mean_max(compute)
        case["compute_s"] = compute_max
        if "ddp" in a.strategies:
            from torch.nn.parallel import DistributedDataParallel as DDP
            ddp = DDP(model, device_ids=[self.local_rank] if self.cuda else None,
                      bucket_cap_mb=a.bucket_mb)
            opt = self.sgd(ddp)
            step_s, comm = self.measure(self.step_fn(ddp, opt, x), prof=True)
            nosync_s, _ = self.measure(self.step_fn(ddp, opt, x, ddp.no_sync))
            case["strategies"]["ddp"] = self.summary(step_s, nosync_s, comm, compute_max)
            del ddp, opt
        del model
        self.free()
        if "fsdp" in a.strategies:
            case["strategies"]["fsdp"] = self.run_fsdp(layers, hidden, x, compute_max)
        return case

    def fsdp_model(self, layers, hidden, mesh=None):
        fully_shard = _fully_shard()
        model = build_model(self.torch, layers, hidden, self.dtype, self.device)
        kw = {"mesh": mesh} if mesh is not None else {}
        for b in model.layers:              # one FSDP unit per layer, as `select` assumes
            fully_shard(b, **kw)
        fully_shard(model, **kw)
        return model

    def solo_mesh(self):
        """A one-rank device mesh per rank (every rank creates every group, as new_group needs)."""
        from torch.distributed.device_mesh import DeviceMesh
        groups = [self.dist.new_group([r]) for r in range(self.world)]
        return DeviceMesh.from_group(groups[self.rank], "cuda" if self.cuda else "cpu")

    def run_fsdp(self, layers, hidden, x, compute_s):
        model = self.fsdp_model(layers, hidden)
        opt = self.sgd(model)
        step_s, comm = self.measure(self.step_fn(model, opt, x), prof=True)
        model.set_requires_gradient_sync(False)
        nosync_s, _ = self.measure(self.step_fn(model, opt, x))
        del model, opt
        self.free()
        model = self.fsdp_model(layers, hidden, self.solo_mesh())
        solo_s, _ = self.measure(self.step_fn(model, self.sgd(model), x))
        del model
        self.free()
        out = self.summary(step_s, nosync_s, comm, compute_s)
        out["solo_step_s"] = self.mean_max(solo_s)[1]
        out["comm_cost_s"] = max(0.0, out["step_s"] - out["solo_step_s"])
        return out

    def summary(self, step_s, nosync_s, comm, compute_s):
        step_mean, step_max = self.mean_max(step_s)
        nosync_mean, nosync_max = self.mean_max(nosync_s)
        out = {"step_s": step_max, "nosync_step_s": nosync_max,
               "exposed_comm_s": max(0.0, step_max - compute_s),
               "sync_minus_nosync_s": max(0.0, step_max - nosync_max)}
        out["comm_cost_s"] = out["sync_minus_nosync_s"]    # DDP's; FSDP replaces it (solo step)
        if comm is not None:
            cm, cx = self.mean_max(comm[0])
            out.update(comm_kernel_s=cm, comm_kernel_max_s=cx, comm_kernel_min_s=comm[1])
        return out

    def free(self):
        import gc
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()


def _fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard      # torch >= 2.6 (FSDP2)
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


# NCCL's kernels ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", older "ncclKernel_..."). Not
# the "nccl:all_reduce" ranges: the profiler also puts those on the GPU timeline (as GPU user
# annotations spanning the kernel), and counting them too counted every kernel twice.
COMM_KERNEL = re.compile(r"^nccl(Dev)?Kernel")
# gloo's own ranges ("gloo:all_reduce"), not the c10d:: dispatcher ops that enclose them
CPU_COMM_OP = re.compile(r"^gloo:")
KERNEL_FILTER = COMM_KERNEL.pattern    # recorded in the output: files without it counted twice


def is_comm(e, cuda):
    """NCCL kernels on the GPU; on CPU (gloo) the collectives' own CPU ranges."""
    from torch.autograd import DeviceType
    if cuda:
        return e.device_type == DeviceType.CUDA and bool(COMM_KERNEL.search(e.name))
    return e.device_type == DeviceType.CPU and bool(CPU_COMM_OP.search(e.name))


def comm_kernels(prof, cuda):
    """[name, start us, duration us] of every communication event, in start order."""
    return sorted(([e.name, e.time_range.start, e.time_range.elapsed_us()] for e in prof.events() if is_comm(e, cuda)),
                  key=lambda k: k[1])


def comm_durations_us(prof, cuda):
    """Durations (us, in start order) of the communication in a profile."""
    return [d for _, _, d in comm_kernels(prof, cuda)]


def min_over_ranks_us(per_rank):
    """Sum over collectives of the shortest duration any rank saw. Every rank issues the
    same collectives in the same order; where the counts differ (a profiler dropped an
    event) the ranks cannot be matched and the mean of the ranks' sums is returned."""
    if len({len(d) for d in per_rank}) != 1:
        return sum(map(sum, per_rank)) / len(per_rank)
    return sum(min(ds) for ds in zip(*per_rank))


def _nccl_version(torch):
    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default="1B", help="comma list of parameter counts (350M,1B,2B)")
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=None, help="fix the hidden size (else from --params)")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb (PyTorch default 25)")
    p.add_argument("--strategies", default="ddp,fsdp")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--profile-steps", type=int, default=5, help="profiled steps for the NCCL kernel sum")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--serialize", action="store_true",
                   help="CUDA_LAUNCH_BLOCKING=1: no kernel beside another (NCCL kernel time = transfer time)")
    p.add_argument("--kernels-out", default=None,
                   help="append each profile's communication kernels to PATH.rankN.json")
    p.add_argument("--dry-run", action="store_true", help="print the shapes and exit")
    p.add_argument("-o", "--out", default="train_step.json")
    a = p.parse_args(argv)
    a.sizes = [parse_count(s) for s in a.params.split(",") if s.strip()]
    a.strategies = [s.strip() for s in a.strategies.split(",") if s.strip()]
    bad = set(a.strategies) - {"ddp", "fsdp"}
    if bad or a.steps < 1 or a.layers < 1:
        p.error(f"bad --strategies {sorted(bad)} or --steps/--layers < 1")
    return a


def main(argv=None):
    a = parse_args(argv)
    if a.dry_run:
        for s in a.sizes:
            L, h, n = shape_for(s, a.layers, a.hidden)
            print(f"params {n} ({n / 1e9:.3f} B): layers {L}, hidden {h}, micro-batch {a.micro_batch}, "
                  f"seq-len {a.seq_len}, {a.dtype}, strategies {','.join(a.strategies)}")
        return 0
    if a.serialize:      # read when CUDA starts: must be set before torch touches the GPU
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
    import torch
    if a.device is None:
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    b = Bench(a)
    cases = [b.run_size(s) for s in a.sizes]
    doc = {"tool": "bench_train_step", "torch": torch.__version__,
           "nccl": _nccl_version(torch) if b.cuda else None,
           "device": torch.cuda.get_device_name(b.device) if b.cuda else "cpu",
           "backend": "nccl" if b.cuda else "gloo", "world_size": b.world, "dtype": a.dtype,
           "micro_batch": a.micro_batch, "seq_len": a.seq_len, "bucket_mb": a.bucket_mb,
           "warmup": a.warmup, "steps": a.steps, "profile_steps": a.profile_steps,
           "serialize": "CUDA_LAUNCH_BLOCKING=1" if a.serialize else None,
           "kernel_filter": KERNEL_FILTER,
           "cases": cases}
    if b.rank == 0:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        for c in cases:
            for name, s in c["strategies"].items():
                print(f"{c['params'] / 1e9:.3f}B {name}: step {s['step_s'] * 1e3:.2f} ms, compute "
                      f"{c['compute_s'] * 1e3:.2f} ms, comm kernels {s.get('comm_kernel_s', float('nan')) * 1e3:.2f} ms "
                      f"(min over ranks {s.get('comm_kernel_min_s', float('nan')) * 1e3:.2f} ms), "
                      f"comm cost {s['comm_cost_s'] * 1e3:.2f} ms",
                      flush=True)
    # every rank done before any tears down: a gloo rank whose peer closed its sockets first
    # aborts at exit ("terminate called without an active exception": 2 of 18 runs, 0 of 30 with it)
    b.dist.barrier()
    b.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
