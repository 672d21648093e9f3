"""comm-bench select: formulas against published / hand-computed values, the fit, the
rules, and decisions whose right answer follows from first principles. The command runs
in-process through comm_bench.cli.main (real click parsing and exit codes)."""
from __future__ import annotations

import json
import os

import pytest

import select_docs as SD
from comm_bench import cli
from comm_bench.select import collectives as CO
from comm_bench.select import memory as M
from comm_bench.select.linkfit import fit_alpha_beta, groups_from
from comm_bench.select.traffic import ddp_buckets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DOCS = ["docs/benchmarks/gpu-h200x2/nccl_ws2.json", "docs/benchmarks/gpu-h200x2/nccl_ws1.json",
             "docs/benchmarks/gpu-h200x2/nccl_pw.json", "docs/heatmaps/netns4-results.json",
             "docs/benchmarks/rdma_sweep_vm_bw.json"]


def run(capsys, *args):
    """(exit code, stdout, stderr) of `comm-bench ARGS`."""
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def run_json(capsys, *args):
    code, out, err = run(capsys, *args, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


# ------------------------------------------------------------------ formulas
def test_zero_paper_worked_example():
    """ZeRO paper (arXiv 1910.02054) Figure 1: 7.5B params, N = 64, mixed-precision Adam."""
    gb = {k: M.model_states_bytes(7.5e9, 2, 2, 12, k, 64) / 1e9 for k in ("ddp", "zero-1", "zero-2", "zero-3")}
    assert gb["ddp"] == 120.0
    assert gb["zero-1"] == 30 + 90 / 64 and round(gb["zero-1"], 1) == 31.4
    assert gb["zero-2"] == 15 + 105 / 64 and round(gb["zero-2"], 1) == 16.6
    assert gb["zero-3"] == 120 / 64 and round(gb["zero-3"], 1) == 1.9


def test_ring_formulas_hand_computed():
    a, b = 10e-6, 100e9                           # 10 us, 100 GB/s
    # all_reduce 1 GB on 4 ranks: 2*3*(10us + 1e9/(4*100e9)) = 60us + 15 ms
    assert CO.ring("all_reduce", 1e9, 4, a, b) == pytest.approx(0.01506, rel=1e-12)
    # all_gather / reduce_scatter: 3*(10us + 2.5 ms)
    assert CO.ring("all_gather", 1e9, 4, a, b) == pytest.approx(0.00753, rel=1e-12)
    assert CO.ring("reduce_scatter", 1e9, 4, a, b) == pytest.approx(0.00753, rel=1e-12)
    assert CO.ring("p2p", 1e6, 2, a, b) == pytest.approx(20e-6, rel=1e-12)
    # tree all_reduce of 8 B on 64 ranks: 2*6*(10us + 0.08 ns) beats the ring's 126 steps
    assert CO.flat("all_reduce", 8, 64, a, b) == pytest.approx(12 * (a + 8 / b))
    st = CO.hierarchical_stages("all_reduce", 8e6, 8, 4)
    assert st == [("reduce_scatter", 8e6, 8, "intra-node"), ("all_reduce", 1e6, 4, "inter-node"),
                  ("all_gather", 8e6, 8, "intra-node")]


def test_megatron_activation_formula():
    # Korthikanti et al. Table 2, no recomputation, t = 1: sbh(34 + 5as/h) bytes per layer
    s, b, h, a = 2048, 1, 4096, 32
    assert M.activation_bytes_per_layer(s, b, h, a, 1, "none") == s * b * h * (34 + 5 * a * s / h)
    assert M.activation_bytes_per_layer(s, b, h, a, 8, "selective") == s * b * h * (10 + 24 / 8)
    assert M.activation_bytes_per_layer(s, b, h, a, 1, "full") == 2 * s * b * h


def test_ddp_buckets_like_pytorch():
    # reverse order, first cap 1 MiB, then 25 MiB; a bucket closes once it reaches its cap
    mib = 1 << 20
    sizes = ddp_buckets([10 * mib] * 4 + [mib // 2, mib // 2], 1, 25)
    assert sizes == [mib, 30 * mib, 10 * mib]
    assert ddp_buckets([100], 2, 25) == [200]


def test_fit_recovers_alpha_beta():
    for op, n, alpha, beta in (("all_reduce", 8, 12e-6, 350e9), ("all_gather", 32, 25e-6, 40e9),
                               ("reduce_scatter", 2, 6e-6, 300e9)):
        doc = SD.collective_doc(["n0"] if n <= 8 else ["n0", "n1", "n2", "n3"], n if n <= 8 else 8,
                                alpha, beta, ops=(op,))
        (g,) = groups_from(doc)
        assert (g.op, g.n) == (op, n)
        assert g.alpha == pytest.approx(alpha, rel=0.01) and g.beta == pytest.approx(beta, rel=0.01)
        assert g.max_rel_err < 0.01
    doc = SD.pairwise_doc(["a", "b", "c"], 40e-6, 12.5e9)
    (g,) = groups_from(doc)
    assert (g.op, g.scope) == ("p2p", "inter-node")
    assert g.alpha == pytest.approx(40e-6, rel=0.01) and g.beta == pytest.approx(12.5e9, rel=0.01)
    a, b = fit_alpha_beta([1e3, 1e6, 1e9], [5e-6 + 1e3 / 1e10, 5e-6 + 1e6 / 1e10, 5e-6 + 1e9 / 1e10])
    assert a == pytest.approx(5e-6, rel=1e-6) and 1 / b == pytest.approx(1e10, rel=1e-6)


# ------------------------------------------------------------------ clusters
@pytest.fixture
def dgx4(tmp_path):
    """4 nodes x 8 H100: NVLink (NVSwitch) inside, 400G IB between, measured with NCCL."""
    intra = SD.write(tmp_path / "intra.json", SD.collective_doc(["n0"], 8, 10e-6, 360e9))
    inter = SD.write(tmp_path / "inter.json", SD.collective_doc(["n0", "n1", "n2", "n3"], 8, 20e-6, 45e9))
    return [intra, inter]


@pytest.fixture
def eth4(tmp_path):
    """4 nodes x 8 H100, no RDMA NIC: 1 Gb/s Ethernet between nodes (tcp pairwise)."""
    topo = lambda h: SD.dgx_topology(h, rdma=False)  # noqa: E731
    intra = SD.write(tmp_path / "intra.json", SD.collective_doc(["n0"], 8, 10e-6, 360e9, topology=topo))
    inter = SD.write(tmp_path / "eth.json", SD.pairwise_doc(["n0", "n1", "n2", "n3"], 50e-6, 0.117e9,
                                                               topology=topo))
    return [intra, inter]


def test_json_keys_and_labels(capsys, dgx4):
    code, res = run_json(capsys, *dgx4, "--model", "llama2-7b")
    assert code == 0
    assert {"recommendation", "candidates", "link_model", "cluster", "workload"} <= set(res)
    assert {"layout", "framework", "rationale"} <= set(res["recommendation"])
    for c in res["candidates"]:
        assert {"layout", "framework", "feasible", "reason", "model_states_gb", "activations_gb", "memory_gb",
                "comm_s", "step_s", "efficiency"} <= set(c)
    for r in res["link_model"]:
        assert {"class", "scope", "op", "alpha_us", "beta_gbs", "max_rel_err", "source"} <= set(r)
        assert r["source"] in ("measured", "extrapolated", "assumed")
    classes = {(r["class"], r["scope"]) for r in res["link_model"] if r["source"] == "measured"}
    assert classes == {("nvlink", "intra-node"), ("ib", "inter-node")}
    assert res["cluster"]["nodes"] == 4 and res["cluster"]["gpus_per_node"] == 8
    assert res["cluster"]["gpu_mem_gb"] == pytest.approx(85.52, abs=0.01)
    assert any(line.startswith("gradient") or "all_gather" in line for line in res["recommendation"]["rationale"])


def test_memory_bound_model_is_not_ddp(capsys, dgx4):
    """llama2-13b: 16 B/param = 208 GB of model states > 85.5 GB; sharded over 32 GPUs it fits."""
    code, res = run_json(capsys, *dgx4, "--model", "llama2-13b")
    by = {c["layout"]: c for c in res["candidates"]}
    assert not by["ddp"]["feasible"] and by["zero-3"]["feasible"]
    assert code == 0
    assert res["recommendation"]["layout"] not in (None, "ddp")
    assert by[res["recommendation"]["layout"]]["feasible"]


def test_small_model_fast_links_gets_ddp(capsys, dgx4):
    """resnet50 keeps whole parameters on every GPU (DDP, or ZeRO-1 where its own table
    predicts DDP's bucketed all_reduce slower: issue 32, the answer is the fastest)."""
    code, res = run_json(capsys, *dgx4, "--model", "resnet50")
    assert code == 0
    assert res["recommendation"]["layout"] in ("ddp", "zero-1")
    top = max(c["efficiency"] for c in res["candidates"] if c["feasible"])
    rec = next(c for c in res["candidates"] if c["layout"] == res["recommendation"]["layout"])
    assert rec["efficiency"] >= top * (1 - 1e-3)
    assert not any(c["layout"].startswith("tp") for c in res["candidates"])    # a CNN: no TP/PP


def test_tp_only_inside_nvlink_domain(capsys, dgx4, tmp_path):
    _, res = run_json(capsys, *dgx4, "--model", "llama2-70b")
    tps = [c for c in res["candidates"] if c["tp"] > 1]
    assert tps and max(c["tp"] for c in tps) <= 8
    for c in tps:
        for item in c["collectives"]:
            if item["what"].startswith("tensor-parallel"):
                assert item["n_inter"] == 1 and item["n_intra"] == c["tp"]
    # the same cluster over PCIe only: no tensor parallelism at all
    topo = lambda h: SD.dgx_topology(h, nvlink=False)  # noqa: E731
    pcie = SD.write(tmp_path / "pcie.json", SD.collective_doc(["n0"], 8, 10e-6, 40e9, topology=topo))
    _, res = run_json(capsys, pcie, "--model", "llama2-70b", "--nodes", "4", "--inter-node-gbs", "45")
    assert res["cluster"]["nvlink"] is False
    assert all(c["tp"] == 1 for c in res["candidates"])
    assert any(r["source"] == "assumed" and r["scope"] == "inter-node" for r in res["link_model"])


def test_slow_ethernet_low_efficiency_exit_1(capsys, eth4):
    args = ("--model", "gpt2-1.5b", "--micro-batch", "8", "--min-efficiency", "0.8")
    code, res = run_json(capsys, *eth4, *args)
    assert code == 1
    best = max(c["efficiency"] for c in res["candidates"] if c["feasible"])
    assert best < 0.5
    assert res["facts"]["inter_gbs"] == pytest.approx(0.117 / 8, rel=0.02)   # one port shared by 8 GPUs
    # the same workload with an IB-class figure between the nodes meets it
    code, res = run_json(capsys, *eth4, *args, "--inter-node-gbs", "45")
    assert code == 0 and res["meets_min_efficiency"]


# ------------------------------------------------------------------ rules
def test_rules_file_flips_recommendation(capsys, dgx4, tmp_path):
    _, res = run_json(capsys, *dgx4, "--model", "resnet50")
    assert res["recommendation"]["layout"] != "fsdp"
    rules = tmp_path / "r.yaml"
    rules.write_text("rules:\n  - name: always-shard\n    if: fits_fsdp and nodes >= 2\n"
                     "    then: {recommend: fsdp, rationale: 'policy: shard on {nodes} nodes'}\n")
    _, res = run_json(capsys, *dgx4, "--model", "resnet50", "--rules", str(rules), "--explain")
    assert res["recommendation"]["layout"] == "fsdp"
    assert "policy: shard on 4 nodes" in res["recommendation"]["rationale"]
    assert res["explain"][0].startswith("always-shard: if fits_fsdp and nodes >= 2 -> True")


@pytest.mark.parametrize("text,needle", [
    ("rules:\n  - if: fits_ddp\n    then: {recommend: ddp}\n    colour: red\n", "unknown key 'colour'"),
    ("rules:\n  - if: fits_dpp\n    then: {recommend: ddp}\n", "unknown fact 'fits_dpp'"),
    ("rules:\n  - if: __import__('os').system('true')\n    then: {recommend: ddp}\n", "not allowed"),
    ("rules:\n  - if: fits_ddp and\n    then: {recommend: ddp}\n", "bad expression"),
    ("rules:\n  - if: fits_ddp\n    then: {recommend: horovod}\n", "bad recommend"),
    ("rules:\n  - if: fits_ddp\n    then: {recommend: ddp, rationale: '{nope}'}\n", "unknown fact {nope}"),
    ("mode: sideways\nrules: []\n", "mode must be merge or replace"),
    ("rules: [\n", "not valid YAML"),
])
def test_bad_rules_exit_2_one_line(capsys, dgx4, tmp_path, text, needle):
    rules = tmp_path / "bad.yaml"
    rules.write_text(text)
    code, out, err = run(capsys, *dgx4, "--model", "resnet50", "--rules", str(rules))
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_input_exit_2(capsys, dgx4, tmp_path):
    assert run(capsys, *dgx4, "--model", "gpt5")[0] == 2
    assert run(capsys, *dgx4)[0] == 2                                   # no workload
    assert run(capsys, str(tmp_path / "missing.json"), "--model", "bert-large")[0] == 2
    code, _, err = run(capsys, *dgx4, "--params", "lots")
    assert code == 2 and "bad count" in err


@pytest.mark.parametrize("args, needle", [
    (["--params", "1e30"], "--params must be"),          # hung the shape derivation before
    (["--model", "llama2-7b", "--step-time", "nan"], "--step-time must be"),   # was an internal error
    (["--model", "llama2-7b", "--seq-len", "0"], "--seq-len must be"),         # 0 read as 'not given'
    (["--model", "llama2-7b", "--micro-batch", "0"], "--micro-batch must be"),
    (["--params", "7B", "--layers", "0"], "--layers must be"),
    (["--model", "llama2-7b", "--bucket-mb", "nan"], "--bucket-mb must be"),
    (["--model", "llama2-7b", "--inter-node-gbs", "-1", "--nodes", "2"], "--inter-node-gbs must be"),
    (["--model", "llama2-7b", "--min-efficiency", "2"], "--min-efficiency must be"),
    (["--model", "llama2-7b", "--gpus-per-node", "100000"], "--gpus-per-node must be"),
    (["--show-model", "--intra-node-gbs", "inf"], "--intra-node-gbs must be"),
])
def test_absurd_numbers_exit_2_one_line(capsys, dgx4, args, needle):
    code, _, err = run(capsys, *dgx4, *args)
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_help(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for opt in ("--model", "--params", "--min-efficiency", "--rules", "--explain", "--json", "--show-model",
                "--ecosystem", "--elastic", "--step-time", "--gpu-tflops", "--bucket-mb", "--precision"):
        assert opt in out


def test_show_model(capsys, dgx4):
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *dgx4, "--show-model", "--json"])
    assert e.value.code == 0
    rows = json.loads(capsys.readouterr().out)["link_model"]
    ar = [r for r in rows if r["op"] == "all_reduce" and r["scope"] == "inter-node"]
    assert ar and ar[0]["beta_gbs"] == pytest.approx(45, rel=0.01)


CPU_DOCS = ("docs/heatmaps/netns4-results.json", "docs/benchmarks/rdma_sweep_vm_bw.json")


@pytest.mark.parametrize("doc", REPO_DOCS)
def test_repo_documents(capsys, doc):
    gpu = ("--gpu", "H100") if doc in CPU_DOCS else ()
    code, res = run_json(capsys, os.path.join(ROOT, doc), "--model", "llama2-7b", *gpu)
    assert res["candidates"] and res["recommendation"]["rationale"]
    assert code == (0 if any(c["feasible"] for c in res["candidates"]) else 1)
    code, out, err = run(capsys, os.path.join(ROOT, doc), "--model", "llama2-7b", "--explain", *gpu)
    assert out.startswith("recommendation:") and "rules path:" in out


@pytest.mark.parametrize("doc", CPU_DOCS)
def test_cpu_run_needs_the_gpu_named(capsys, doc):
    """A gloo/tcp/rdma run on CPUs says nothing of the GPUs to plan: one line, exit 2
    (it silently assumed 80 GB H100s before)."""
    code, out, err = run(capsys, os.path.join(ROOT, doc), "--model", "llama2-7b")
    assert code == 2 and "--gpu NAME" in err and err.count("\n") == 1 and not out


def test_terminal_answer_first(capsys, dgx4, monkeypatch):
    """The answer opens the output: layout, the flags to set, why, then what it assumed;
    the table's top row is the recommendation, marked; times read as us/ms/s."""
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run(capsys, *dgx4, "--model", "llama2-13b")
    lines = out.splitlines()
    assert lines[0].startswith("recommendation: ")
    layout = lines[0].split()[1]
    assert lines[1].startswith("  set: ") and any(l.startswith("  why: ") for l in lines[:6])
    i = lines.index("assumed (defaults this answer rests on; the flag that changes each):")
    assumed = lines[i + 1:i + 8]
    assert any("global batch 1024: the preset's recipe" in l for l in assumed)
    rows = [l for l in lines if l.lstrip().startswith("*")]
    assert len(rows) == 1 and rows[0].split()[1] == layout
    header = next(n for n, l in enumerate(lines) if "layout" in l and "eff." in l)
    assert lines[header + 2].split()[:2] == ["*", layout]
    assert not any("e-0" in l or "e+0" in l for l in lines), "scientific notation in the output"
    assert max(len(l) for l in lines[header - 2: header + 12]) <= 100


def test_elastic_and_jax(capsys, dgx4):
    _, res = run_json(capsys, *dgx4, "--model", "resnet50", "--elastic")
    fw = res["recommendation"]["framework"]
    assert fw in ("PyTorch DDP + TorchElastic", "DeepSpeed ZeRO-1 + TorchElastic")
    _, res = run_json(capsys, *dgx4, "--model", "resnet50", "--ecosystem", "jax")
    assert res["recommendation"]["framework"] == "JAX pjit/shard_map"


def test_html_page_with_heatmap(capsys, tmp_path):
    out = tmp_path / "train.html"
    code, _, err = run(capsys, os.path.join(ROOT, "docs/heatmaps/netns4-results.json"), "--model", "bert-large",
                       "--gpu", "H100", "--html", str(out))
    assert code == 0, err
    page = out.read_text()
    assert "What this means for training" in page and "<h2>Candidates</h2>" in page
    assert "data:image/png;base64," in page            # the measured links' heatmap feeds the page


def test_unmeasured_scope_is_assumed_from_topology(capsys, dgx4):
    """Only the intra-node run and --nodes 8: inter-node = IB port 50 GB/s x validate's 0.75."""
    code, res = run_json(capsys, dgx4[0], "--model", "llama2-13b", "--nodes", "8")
    assert code == 0 and res["cluster"]["world_size"] == 64
    (row,) = [r for r in res["link_model"] if r["scope"] == "inter-node"]
    assert row["source"] == "assumed" and row["class"] == "ib" and row["beta_gbs"] == pytest.approx(37.5)
    assert all(c["comm_source"] == "assumed" for c in res["candidates"] if c["kind"] != "megatron" and c["feasible"])
    # no measurement and no rate (the H200 VM's virtio NIC has none): say what to give, exit 2
    code, _, err = run(capsys, os.path.join(ROOT, REPO_DOCS[0]), "--model", "llama2-7b", "--nodes", "2")
    assert code == 2 and "--inter-node-gbs" in err and err.count("\n") == 1


def test_precision_sets_bytes_moved(capsys, dgx4):
    _, bf16 = run_json(capsys, *dgx4, "--model", "bert-large")
    _, amp = run_json(capsys, *dgx4, "--model", "bert-large", "--precision", "amp")
    grad = lambda res: next(i["bytes"] for c in res["candidates"] if c["layout"] == "ddp"  # noqa: E731
                            for i in c["collectives"])
    assert grad(amp) == pytest.approx(2 * grad(bf16), rel=1e-6)
    assert grad(bf16) == pytest.approx(2 * 340e6, rel=1e-6)    # bf16 gradients: 2 B per parameter
