"""select for mixture-of-experts models (issue 32): the expert-parallel all-to-all is priced
from the measured alltoall curve of the link it crosses, so a slower inter-node alltoall
changes the answer; the alltoall cost model; published runs' layouts are expressible and
feasible under their settings (tools/check_select_runs.py)."""
from __future__ import annotations

import os
import sys

import pytest

import select_docs as SD
from comm_bench.select import collectives as CO
from comm_bench.select import select

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402

A2A = ("alltoall",)


def two_dgx(tmp_path):
    """An 8-GPU node's collectives (360 GB/s busbw) and two such nodes' (45 GB/s)."""
    return [SD.write(tmp_path / "intra.json", SD.collective_doc(["n0"], 8, 10e-6, 360e9)),
            SD.write(tmp_path / "inter.json", SD.collective_doc(["n0", "n1"], 8, 20e-6, 45e9))]


def test_alltoall_cost_model():
    """Pairwise alltoall of a rank's S-byte buffer over n ranks: (n-1) steps, (n-1)/n of S
    leaves the rank (ops.py's bus factor); across nodes only the inter-node share."""
    a, b = 10e-6, 50e9
    assert CO.ring("alltoall", 1e9, 4, a, b) == pytest.approx(3 * a + 0.75 * 1e9 / b)
    assert CO.hierarchical_stages("alltoall", 1e9, 8, 2) == [("alltoall", 1e9, 2, "inter-node")]


H100 = dict(gpu_name="NVIDIA H100 80GB HBM3", gpu_mem_bytes=81559 * 2 ** 20, nvlink_version=4, nvlink_links=18,
            nvlink_gbs=450.0)


def _cluster(folder, a2a_busbw, gpus=8):
    """H100 nodes of `gpus` GPUs (8: DGX H100, NVSwitch; 4: a 4-GPU board) with one 400G NIC
    per GPU, NCCL measured: the node's collectives and alltoall, 2-node collectives at 370 GB/s
    busbw (scaled by gpus / 8), and a 2-node alltoall at a2a_busbw."""
    topo = lambda h: SD.node_topology(h, nic_gbs=50.0, nic_kind="ib", nics=gpus, gpus=gpus, **H100)  # noqa: E731
    docs = {"intra": SD.collective_doc(["n0"], gpus, 8e-6, 360e9, ops=("all_reduce", "all_gather", "reduce_scatter")
                                       + A2A, topology=topo),
            "inter": SD.collective_doc(["n0", "n1"], gpus, 20e-6, 370e9 * gpus / 8, topology=topo),
            "a2a": SD.collective_doc(["n0", "n1"], gpus, 20e-6, a2a_busbw, ops=A2A, topology=topo)}
    return [SD.write(folder / f"{k}.json", d) for k, d in docs.items()]


def test_slower_inter_node_alltoall_changes_the_moe_answer(tmp_path):
    """gpt-oss-120b on 8 nodes of 4 H100 (a node too small for its experts' best spread). The
    measured 2 x 4 alltoall at 81 GB/s busbw (half of each buffer crosses the node over the
    GPU's own NIC at 0.925 x 50 GB/s: 2 x 46.25 x 7/8): the answer's expert-parallel group
    spans nodes. Made 4x slower: the answer keeps expert parallelism inside a node."""
    fast_gbs = 2 * 46.25 * 7 / 8
    answers = {}
    for busbw in (fast_gbs * 1e9, fast_gbs / 4 * 1e9):
        folder = tmp_path / f"a2a{busbw / 1e9:g}"
        folder.mkdir()
        res = select(_cluster(folder, busbw, gpus=4), model="gpt-oss-120b", nodes=8)
        rec = next(c for c in res["candidates"] if c["layout"] == res["recommendation"]["layout"])
        answers[busbw] = (rec, [i for i in rec["collectives"] if i["op"] == "alltoall"])
    (fast, fast_a2a), (slow, slow_a2a) = answers.values()
    assert fast["ep"] > 1 and fast_a2a[0]["n_inter"] > 1          # experts spread across nodes
    assert "a2a.json" in fast_a2a[0]["note"]                       # priced from the measured alltoall
    assert slow["layout"] != fast["layout"]
    assert slow["ep"] > 1 and all(i["n_inter"] == 1 for i in slow_a2a)   # EP inside a node only
    assert slow["tokens_per_s"] < fast["tokens_per_s"]
    assert any("--expert-model-parallel-size" in line or "expert_parallel_degree" in line
               for line in fast["config"])


def test_alltoall_across_more_nodes_runs_at_the_nics_rate(tmp_path):
    """A 2 x 8 alltoall measured at busbw B (86.7 GB/s; 84.5 at its largest size) moves half of
    each rank's buffer S over the rank's own NIC: NIC rate = B x 16/15 x 1/2. Over 4 nodes x 8 the 3/4 of S that leaves the node
    crosses that NIC: 3 alpha + 0.75 S / (B x 8/15), not the measured busbw (the figure select
    took before 2026-12-04, 1.9x too fast). The measured shape itself is read off its curve."""
    docs = _cluster(tmp_path, 86.7e9)
    res = select(docs, model="mixtral-8x7b", nodes=4)
    w, cl, lm, comp, ov, hr = res["context"]
    S = 1 << 28
    a2a = next(g for g in lm.groups if g.op == "alltoall" and g.scope == "inter-node")
    nic = a2a.busbw_top() * 16 / 15 / 2       # busbw at its largest measured size (alpha included)
    t = [lm.collective("alltoall", x, 8, 4).seconds for x in (S, 2 * S)]   # the difference: no alpha
    assert t[1] - t[0] == pytest.approx(0.75 * S / nic, rel=1e-3)
    two = lm.collective("alltoall", S, 8, 2)
    assert two.seconds == pytest.approx(15 * 20e-6 + 15 / 16 * S / 86.7e9, rel=1e-3)   # the document's time
    assert two.source == "measured"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("runs"))
    return [RUNS.check_row(d, *r) for r in RUNS.RUNS]


def llama3_fsdp(folder, row):
    """A Llama 3 405B row under the paper's own FSDP: "Our use of FSDP for Llama 3 shards
    optimizer states and gradients, but for model shards we do not reshard after forward"
    (arXiv 2407.21783, section 3.3.2): gradients reduce-scattered every micro-batch and kept
    sharded, not accumulated whole as torchtitan's FSDP2 does under a pipeline."""
    from comm_bench.select.predict import predict
    model, system, gpus, (kind, tp, cp, pp, ep, etp, mb, v), seq, gb, rc, grad, prec, a2a = row[:10]
    res = select(RUNS.documents(folder, system), model=model, nodes=gpus // 8, seq_len=seq, global_batch=gb,
                 micro_batch=mb, recompute=rc, grad_reduce=grad, precision=prec, a2a_overlap=a2a)
    w, cl, lm, comp, ov, hr = res["context"]
    shape = {"layout": "published", "kind": kind, "tp": tp, "cp": cp, "pp": pp, "dp": gpus // (tp * cp * pp), "ep": ep}
    wl = dict(w, recompute=rc, pp_layout=RUNS.published_split(w["layers"], pp, v))
    return [predict(shape, wl, cl, lm, comp, ov, hr, force=(rc, False, tp > 1, False, sharded), virtual=v)
            for sharded in (False, True)], w


def test_published_layouts_are_expressible_and_feasible(runs, tmp_path):
    """Every published run of tools/check_select_runs.py is a feasible layout under its own
    settings (how close each lands is docs/benchmarks/selection-runs.md's table). The Llama 3
    405B rows: the tool prices them with the paper's FSDP (gradients sharded), where every one
    fits with room; torchtitan's FSDP2 under a pipeline (gradients kept whole, 6.3 GB more on
    the fullest rank) would be infeasible by 0.3 GB."""
    for row, r in zip(RUNS.RUNS, runs):
        pc = r["published_config"]
        if r["model"] == "llama3-405b" and r["published_layout"].startswith("fsdp-tp"):
            (whole, sharded), w = llama3_fsdp(str(tmp_path), row)
            assert sharded["memory_gb"] == pytest.approx(pc["memory_gb"]) and pc["feasible"]
            assert sharded["feasible"] and not whole["feasible"], (sharded["reason"], whole["reason"])
            assert sharded["grads_sharded"] and sharded["memory_gb"] < 0.98 * 77.0
            # the states differ by the whole bf16 gradients less their fp32 shard: 2 - 4 / dp bytes a parameter
            assert whole["model_states_gb"] - sharded["model_states_gb"] > 6.0
            continue
        assert pc["feasible"], r
        assert r["recommended"] and r["recommended_vs_published"] >= 1 - 1e-3, r
    assert sum(r["seq"] >= 8192 for r in runs) >= 2
    assert sum(r["model"] in ("gpt-oss-120b", "mixtral-8x7b", "deepseek-v3") for r in runs) >= 2


def test_expert_and_dense_weights_split_by_hand():
    """DeepSeek-V3 on tp2 pp8 ep64: dense weights / (tp pp) + one V h / tp embedding on the end
    stages; routed experts / (tp pp ep)."""
    from comm_bench.select import shapes as SH
    from comm_bench.select import workload as W
    from comm_bench.select.step import split_params
    w = W.build("deepseek-v3")
    assert SH.expert_params(w) == 58 * 256 * 3 * 7168 * 2048
    experts = SH.expert_params(w, mtp=True)   # + the multi-token-prediction module's routed experts (issue 41)
    assert experts == 59 * 256 * 3 * 7168 * 2048
    dense, exp = split_params(w, {"tp": 2, "pp": 8, "ep": 64})
    emb = 2 * 129280 * 7168
    assert dense == pytest.approx((w["params"] - experts - emb) / 16 + 129280 * 7168 / 2)
    assert exp == pytest.approx(experts / (2 * 8 * 64))


def test_fsdp_without_reshard_keeps_params_and_grads_under_a_pipeline(tmp_path):
    """torchtitan with PP and reshard_after_forward off: (p + g) psi' + k psi' / N; resharded:
    all three / N (+ two gathered units)."""
    docs = two_dgx(tmp_path)
    from comm_bench.select.predict import predict
    res = select(docs, model="llama3-8b", micro_batch=1)
    w, cl, lm, comp, ov, hr = res["context"]
    shape = {"layout": "x", "kind": "fsdp-tp", "tp": 2, "cp": 1, "pp": 2, "dp": 4, "ep": 1}
    keep = predict(shape, w, cl, lm, comp, ov, hr, force=("none", False, True, False))
    shard = predict(shape, w, cl, lm, comp, ov, hr, force=("none", False, True, True))
    from comm_bench.select.pipeline import Split
    from comm_bench.select.step import split_params
    # the fuller of the two stages (its layers + its embedding or output layer) sets the memory
    for out in (keep, shard):
        split = Split(tuple(out["pp_split"]), out["pp_split_how"])
        assert sum(split.stages) == 32
        psi = max(split_params(w, shape, split, r)[0] for r in (0, 1))
        want = (4 * psi + 12 * psi / 4) if out is keep else 16 * psi / 4
        assert out["model_states_gb"] == pytest.approx(want / 1e9, abs=1e-3)
    assert any("once per step" in i["what"] for i in keep["collectives"])


def test_ring_attention_sends_by_hand(tmp_path):
    """llama3-8b at 131,072 tokens on tp2 x cp8: per layer (cp - 1) x 3 sends of a K, V chunk
    of s / cp tokens x 2 x 8 KV heads x 128 / tp x 2 bytes = 33.6 MB."""
    docs = two_dgx(tmp_path)
    from comm_bench.select.predict import predict
    res = select(docs, model="llama3-8b", seq_len=131072, global_batch=2, micro_batch=1)
    w, cl, lm, comp, ov, hr = res["context"]
    c = predict({"layout": "x", "kind": "megatron", "tp": 2, "cp": 8, "pp": 1, "dp": 1, "ep": 1}, w, cl, lm, comp,
                ov, hr, force=("full", True, True))
    ring = next(i for i in c["collectives"] if i["what"].startswith("context-parallel"))
    chunk = 131072 / 8 * 2 * 8 * 128 / 2 * 2
    assert ring["count"] == c["microbatches"] * 7 * 4 * 32                 # full recomputation: 4 per step
    assert ring["bytes"] == pytest.approx(ring["count"] * chunk)
    assert any("--context-parallel-size 8" in line for line in c["config"])


def test_module_recomputation_by_hand(tmp_path):
    """Megatron-Core's --recompute-modules layernorm moe_act on gpt-oss-120b (h = f_e = 2,880,
    k = 4, SwiGLU), sequence parallel off at tp 1: per token per layer it drops the two norms'
    outputs (2 h) and one f_e per routed expert (the gate x up product), 2 bytes each, and
    costs no GEMM; torchtitan and DeepSpeed have no such option: named, not priced."""
    from comm_bench.select import memory as M
    from comm_bench.select.predict import predict
    docs = two_dgx(tmp_path)
    res = select(docs, model="gpt-oss-120b", micro_batch=1, recompute="modules:layernorm,moe_act", gpu_mem="400GB")
    w, cl, lm, comp, ov, hr = res["context"]
    tokens = w["seq_len"]
    none = M.layer_activation_bytes(w, 1, 1, "none")
    for rc, saved in (("modules:layernorm", 2 * 2880), ("modules:moe_act", 4 * 2880),
                      ("modules:layernorm,moe_act", 2 * 2880 + 4 * 2880)):
        assert none - M.layer_activation_bytes(w, 1, 1, rc) == pytest.approx(2 * saved * tokens)
    shape = {"layout": "x", "kind": "megatron", "tp": 1, "cp": 1, "pp": 1, "dp": 16, "ep": 8}
    mod = predict(shape, w, cl, lm, comp, ov, hr)
    plain = predict(shape, dict(w, recompute="none"), cl, lm, comp, ov, hr)
    assert mod["recompute"] == "modules:layernorm,moe_act"
    assert any("--recompute-granularity selective --recompute-modules layernorm moe_act" in line
               for line in mod["config"])
    assert 0 < mod["step_s"] - plain["step_s"] < 0.01 * plain["step_s"]   # element-wise re-runs only
    titan = predict(dict(shape, kind="fsdp-tp"), w, cl, lm, comp, ov, hr)
    assert not titan["feasible"] and "Megatron-Core's --recompute-modules" in titan["reason"]


def test_bf16_gradient_reduction_halves_megatron_gradients(tmp_path):
    """--grad-reduce bf16 (Megatron's --grad-reduce-in-bf16): 2 B gradients instead of the fp32
    main gradients' 4, both in memory and in the gradient reduce-scatter's bytes."""
    from comm_bench.select.predict import predict
    docs = two_dgx(tmp_path)
    shape = {"layout": "x", "kind": "megatron", "tp": 2, "cp": 1, "pp": 1, "dp": 8, "ep": 1}
    out = {}
    for g in ("fp32", "bf16"):
        res = select(docs, model="llama3-8b", micro_batch=1, grad_reduce=g)
        w, cl, lm, comp, ov, hr = res["context"]
        out[g] = predict(shape, w, cl, lm, comp, ov, hr, force=("full", False, True))
    from comm_bench.select.step import split_params
    psi = split_params(w, shape)[0]
    assert out["fp32"]["model_states_gb"] - out["bf16"]["model_states_gb"] == pytest.approx(2 * psi / 1e9, abs=1e-3)
    grads = {g: sum(i["bytes"] for i in o["collectives"] if "gradient" in i["what"]) for g, o in out.items()}
    assert grads["bf16"] == pytest.approx(grads["fp32"] / 2)
    assert any("--grad-reduce-in-bf16" in line for line in out["bf16"]["config"])
    assert not any("--grad-reduce-in-bf16" in line for line in out["fp32"]["config"])
    from comm_bench.errors import UsageError
    with pytest.raises(UsageError, match="unknown --grad-reduce 'fp16'"):
        select(docs, model="llama3-8b", grad_reduce="fp16")


@pytest.mark.parametrize("args, message", [
    (["--model", "llama3-8b", "--recompute", "modules:moe_act"], "moe_act needs a mixture of experts"),
    (["--params", "1B", "--recompute", "modules:layernorm"], "needs a model shape"),
])
def test_module_recomputation_refused_where_it_means_nothing(tmp_path, capsys, args, message):
    from comm_bench import cli
    with pytest.raises(SystemExit) as e:
        cli.main(["select", two_dgx(tmp_path)[0], *args])
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_moe_answers_say_their_compute_is_unverified(tmp_path):
    """A MoE answer priced from FLOPs says that published MoE runs came out slower than
    predicted and how to plan from a measured step; given --mfu it no longer says so. A
    Megatron answer names the fp32 gradients it assumes unless --grad-reduce bf16."""
    docs = two_dgx(tmp_path)
    moe = "mixture of experts: predicted 1.4-2.9x faster than every published MoE run"
    assumed = lambda **kw: select(docs, model="mixtral-8x7b", **kw)["recommendation"]["assumed"]  # noqa: E731
    assert any(line.startswith(moe) for line in assumed())
    assert not any(line.startswith(moe) for line in assumed(mfu=0.3))
    dense = select(docs, model="llama3-8b", micro_batch=1, recompute="none")
    assert not any(line.startswith(moe) for line in dense["recommendation"]["assumed"])
    from comm_bench.select.answer import assumptions
    from comm_bench.select.predict import predict
    shape = {"layout": "x", "kind": "megatron", "tp": 4, "cp": 1, "pp": 4, "dp": 1, "ep": 1}
    for g, said in (("fp32", True), ("bf16", False)):
        w, cl, lm, comp, ov, hr = select(docs, model="llama3-70b", grad_reduce=g)["context"]
        c = predict(shape, w, cl, lm, comp, ov, hr)
        lines = assumptions(w, cl, lm, c, comp)
        assert any(line.startswith("gradients: fp32 main gradients") for line in lines) == said


def test_fp8_linear_layers_by_hand(tmp_path):
    """--precision fp8 on H100: the linear layers' FLOPs at the FP8 peak (1,979) x the measured
    FP8 efficiency, attention at bf16's, plus 6 bytes per cast operand element; the kept
    projection inputs at 1 byte, with the output projection's own copy of the attention output
    (llama3-8b: h 4,096, f 14,336, h_v 4,096: 2 h + f - h_v bytes less per token and layer)."""
    from comm_bench.select import compute as CM
    from comm_bench.select import memory as M
    from comm_bench.select import shapes as SH
    docs = two_dgx(tmp_path)[:1]
    runs = {p: select(docs, model="llama3-8b", micro_batch=1, precision=p, gpu="H100")["context"] for p in ("bf16", "fp8")}
    (wb, *_, cb, _, _), (w8, *_, c8, _, _) = runs["bf16"], runs["fp8"]
    h, f, s = 4096, 14336, w8["seq_len"]
    assert M.layer_activation_bytes(wb, 1) - M.layer_activation_bytes(w8, 1) == pytest.approx((2 * h + f - h) * s)
    io = 32 * SH.linear_io_per_token(w8)
    assert c8.fp8_cast_seconds(1, 1, 1.0) == pytest.approx(6 * io * s / 3.35e12)
    from comm_bench.select import workload as W
    gemm = W.flops_per_sample(w8, "none", executed=True) - W.attention_flops_per_sample(w8, "none", executed=True)
    attn = W.attention_flops_per_sample(w8, "none", executed=True)
    kept = M.layer_activation_bytes(w8, 1, 1, "none") * 32
    expect = (gemm / (1979e12 * CM.FP8_GEMM_EFFICIENCY) + attn / (989e12 * c8.attention_efficiency())
              + CM.ELEMENTWISE_PASSES * kept / 3.35e12 + 6 * io * s / 3.35e12)
    assert c8.seconds(1) == pytest.approx(expect)
    assert c8.seconds(1) < 0.75 * cb.seconds(1)


def test_fp8_configuration_lines_and_refusal(tmp_path, capsys):
    from comm_bench import cli
    from comm_bench.select.predict import predict
    docs = two_dgx(tmp_path)[:1]
    w, cl, lm, comp, ov, hr = select(docs, model="llama3-8b", micro_batch=1, precision="fp8", gpu="H100")["context"]
    lines = {k: predict({"layout": "x", "kind": k, "tp": t, "cp": 1, "pp": 1, "dp": 8 // t, "ep": 1}, w, cl, lm,
                        comp, ov, hr)["config"] for k, t in (("megatron", 2), ("fsdp", 1), ("fsdp-tp", 2), ("zero-1", 1))}
    assert any("--fp8-format hybrid --fp8-recipe tensorwise" in x for x in lines["megatron"])
    assert any("convert_to_float8_training" in x for x in lines["fsdp"])
    assert any('converters = ["float8"]' in x for x in lines["fsdp-tp"])
    assert any("Float8CurrentScaling" in x for x in lines["zero-1"])
    with pytest.raises(SystemExit) as e:
        cli.main(["select", docs[0], "--model", "llama3-8b", "--precision", "fp8", "--gpu", "A100"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "no FP8 tensor cores" in err and len(err.strip().splitlines()) == 1


def test_expert_tensor_parallelism_by_hand(tmp_path):
    """mixtral-8x7b (E 8, k 2, h 4,096, f 14,336) on 4 x 8 H100 as tp2 pp4 dp4 ep4, the experts
    split over etp 2 (Megatron-Core's default, etp = tp) or whole (etp 1): etp 1 holds twice
    the expert weights and keeps each routed copy's input once (etp 2: gathered, on both
    GPUs); etp 2 gathers the received copies over its pair and scatters the outputs back (per
    MoE layer forward + backward: 2 all_gathers and 2 reduce_scatters of etp x the GPU's
    routed bytes); neither runs the dense MLP's tp pair in a MoE layer (attention's only: 2
    per layer); the flags say which."""
    from comm_bench.select import memory as M
    from comm_bench.select import shapes as SH
    from comm_bench.select import strategies as ST
    from comm_bench.select.predict import predict
    from comm_bench.select.rules import LAYOUT_RE
    from comm_bench.select.step import split_params
    res = select(_cluster(tmp_path, 86.7e9), model="mixtral-8x7b", nodes=4, micro_batch=1, global_batch=64)
    w, cl, lm, comp, ov, hr = res["context"]
    base = {"layout": "x", "kind": "megatron", "tp": 2, "cp": 1, "pp": 4, "dp": 4, "ep": 4}
    two, one = (predict(dict(base, etp=e), w, cl, lm, comp, ov, hr, force=("none", True, True)) for e in (2, 1))
    experts = SH.expert_params(w)
    assert two["feasible"] and one["feasible"], (two["reason"], one["reason"])
    assert split_params(w, dict(base, etp=2))[1] == pytest.approx(experts / (2 * 4 * 4))
    assert split_params(w, dict(base, etp=1))[1] == pytest.approx(experts / (4 * 4))
    assert split_params(w, base)[1] == pytest.approx(experts / (2 * 4 * 4))       # etp defaults to tp
    h, k, s, L, m = 4096, 2, w["seq_len"], 8, two["microbatches"]               # 8 layers a stage
    kept = [M.layer_activation_bytes(w, 1, 2, "none", True, e) for e in (2, 1)]
    assert kept[0] - kept[1] == pytest.approx(k * h * (2 - 1) * 2 * s / 2)        # the gathered inputs
    routed = s / 2 * k * h * 2                # a GPU's s / tp tokens, k copies, 2 bytes
    etp_items = [i for i in two["collectives"] if i["what"].startswith("expert-tensor-parallel")]
    assert sorted(i["op"] for i in etp_items) == ["all_gather", "reduce_scatter"]
    for i in etp_items:
        assert i["count"] == m * 2 * L and i["bytes"] == pytest.approx(i["count"] * 2 * routed)
    assert not any(i["what"].startswith("expert-tensor-parallel") for i in one["collectives"])
    for c in (one, two):
        tp_ar = next(i for i in c["collectives"] if i["what"].startswith("tensor-parallel"))
        assert tp_ar["count"] == m * 2 * L
    assert any("--expert-tensor-parallel-size 1" in line for line in one["config"])
    assert not any("--expert-tensor-parallel-size" in line for line in two["config"])
    assert one["model_states_gb"] > two["model_states_gb"]
    name = ST.name("megatron", 2, 1, 8, 1, 4, 1)
    assert name == "tp2-pp8-dp1-ep4-etp1" and LAYOUT_RE.match(name) and ST.name("megatron", 2, 1, 8, 1, 4, 2) == \
        "tp2-pp8-dp1-ep4"
    shapes = {(c["tp"], c["ep"], c.get("etp")) for c in res["candidates"] if c["kind"] == "megatron"}
    assert (2, 4, 1) in shapes and (2, 4, 2) in shapes and (2, 8, 1) in shapes and (2, 8, 2) in shapes
    assert all((c["tp"] * c["cp"] * c["dp"]) % (c["ep"] * (c.get("etp") or c["tp"])) == 0
               for c in res["candidates"] if c["kind"] == "megatron")


def test_expert_table_is_the_measured_run():
    """comm_bench/data/select_expert_gemms.json is what tools/check_select_kernels.py derives
    from the recorded H200 run (an edit of either alone fails here), and every measured
    figure is a share of a peak (0, 1]."""
    import json
    import check_select_kernels as KR
    from comm_bench.select.compute import EXPERT_TABLE
    with open(os.path.join(ROOT, "docs", "benchmarks", "selection-kernels-experts-h200.json")) as f:
        raw = json.load(f)
    derived = json.loads(json.dumps(KR.expert_table(raw)))
    # a run of the expert kind beside the grid (its gpt-oss ep8 cases) adds no shape
    other = {"kind": "expert", "case": "gpt-oss-120b ep8, b 1", "how": "loop of matmuls", "experts": 16,
             "M": 1024, "hidden": 2880, "ffn": 2880, "efficiency": 0.6}
    assert json.loads(json.dumps(KR.expert_table(dict(raw, cases=raw["cases"] + [other])))) == derived
    with open(EXPERT_TABLE) as f:
        shipped = json.load(f)
    assert shipped == derived
    models = {s["model"] for s in shipped["shapes"]}
    assert {"qwen3-30b-a3b", "gpt-oss-120b", "qwen3-235b-a22b", "deepseek-v3", "mixtral-8x7b"} <= models
    assert all(0 < e <= 1 for s in shipped["shapes"] for k in ("bf16", "fp8") for _, e in s[k])


def test_expert_efficiency_by_shape_and_tokens_per_expert(tmp_path):
    """Qwen3-30B-A3B's experts (h 2,048, f 768; 128 experts, top-8) at 4,096 tokens: ep 8 at
    b 2 gives each expert M = 8 x 2 x 4,096 x 8 / 128 = 4,096 rows (the table's 4,096 figure),
    ep 1 at b 1 only 256 (its 256 figure), between two measured M log-linear, below the
    smallest held; in FP8 the FP8 column. Fewer rows per expert: slower experts."""
    import math
    from comm_bench.select import workload as W
    from comm_bench.select.compute import Compute, expert_shapes, gpu_figures
    table = next(s for s in expert_shapes() if s["model"] == "qwen3-30b-a3b")
    bf, f8 = dict(table["bf16"]), dict(table["fp8"])
    w = W.build("qwen3-30b-a3b", seq_len=4096)
    c = Compute(w, gpu_figures({"gpu_name": "NVIDIA H100 80GB HBM3"}))
    assert c.expert_efficiency(2, 8) == pytest.approx(bf[4096])
    assert c.expert_efficiency(1, 1) == pytest.approx(bf[256])
    mid = bf[2048] + (bf[4096] - bf[2048]) * math.log(3072 / 2048) / math.log(2)
    assert c.expert_efficiency(1.5, 8) == pytest.approx(mid)
    assert c.expert_efficiency(1, 1, tp=8) == pytest.approx(bf[256])          # etp = tp: gathered, 256
    assert c.expert_efficiency(1, 1, tp=8, etp=1) == pytest.approx(bf[128])   # M 32: held at 128
    c8 = Compute(W.build("qwen3-30b-a3b", seq_len=4096, precision="fp8"), gpu_figures({"gpu_name": "H100"}))
    assert c8.expert_efficiency(2, 8) == pytest.approx(f8[4096])
    assert c8.expert_rate(2, 8) == pytest.approx(1979e12 * f8[4096])
    assert c.seconds(1, ep=1, logits=False) > c.seconds(1, ep=8, logits=False)


def test_alltoall_overlap_by_hand(tmp_path):
    """Megatron-Core's combined 1F1B (--a2a-overlap, Megatron-Bridge's moe_a2a_overlap): in
    the steady state a micro-batch's dispatcher communication hides behind the paired
    micro-batch's compute, the min(m, pp) edge micro-batches run theirs exposed; the flags
    are printed; --no-a2a-overlap prices it exposed; torchtitan has no such schedule."""
    from comm_bench.select.predict import predict
    from comm_bench.select.step import combined_1f1b
    assert combined_1f1b(10.0, 10, 4, 0.5) == pytest.approx((4 * 1.0 + 6 * 0.5) / 10)
    assert combined_1f1b(10.0, 10, 1, 2.0) == pytest.approx(1.0 / 10)
    res = select(_cluster(tmp_path, 86.7e9), model="mixtral-8x7b", nodes=4, micro_batch=1, global_batch=64)
    w, cl, lm, comp, ov, hr = res["context"]
    shape = {"layout": "x", "kind": "megatron", "tp": 2, "cp": 1, "pp": 4, "dp": 4, "ep": 4, "etp": 1}
    on, off = (predict(shape, dict(w, a2a_overlap=x), cl, lm, comp, ov, hr, force=("none", True, True), virtual=1)
               for x in (True, False))
    assert on["a2a_overlap"] and not off["a2a_overlap"]
    assert any("--overlap-moe-expert-parallel-comm --delay-wgrad-compute" in line for line in on["config"])
    assert not any("--overlap-moe-expert-parallel-comm" in line for line in off["config"])
    m, a2a = on["microbatches"], next(i for i in on["collectives"] if i["op"] == "alltoall")["seconds"]
    t_mb = on["compute_s"] / m
    steps = m / (1 - on["bubble"])           # m + (pp - 1) / v
    hidden = a2a / m - combined_1f1b(a2a, m, 4, t_mb)
    assert hidden > 0
    assert off["step_s"] - on["step_s"] == pytest.approx(steps * hidden, rel=1e-6)
    titan = predict(dict(shape, kind="fsdp-tp"), dict(w, a2a_overlap=True), cl, lm, comp, ov, hr,
                    force=("none", False, True, True), virtual=1)
    assert not titan["a2a_overlap"]
