"""The seed's serving scenarios, as the serving planner sees them (numbers for docs/serving.md).

1. A 7B fraud model at 50,000 transactions/s, each under 50 ms (the seed: vLLM, TP 8 on one
   8-GPU node, max 4,096 sequences).
2. A 70B model at 1,000 requests/s.
3. Continuous batching with a 10 ms collection window against one request at a time (the
   seed: 8x the throughput).
4. A < 1B text classifier on CPU or GPU (the seed: 8 CPU nodes do 5,000 req/s at 20 ms; the
   GPU cluster was 2x faster and 5x the cost).

    python benchmarks/serving_seeds.py
"""

from __future__ import annotations

from gpucluster.catalog import catalog
from gpucluster.model.serving.batcher_sim import simulate
from gpucluster.model.serving.kv_cache import Quant, replica_memory
from gpucluster.model.serving.queueing import Lengths, StepModel, Traffic, max_rate
from gpucluster.model.serving.step_time import Replica
from gpucluster.plan.fabric_from import from_flags
from gpucluster.plan.serve_search import search
from gpucluster.specs.workload import TransformerSpec, load_model_spec

BERT_BASE = TransformerSpec(name="BERT-base-class (110M)", layers=12, hidden=768, heads=12, vocab=30522, seq_len=512,
                            tied_embeddings=True)
BERT_LARGE = TransformerSpec(name="BERT-large-class (335M)", layers=24, hidden=1024, heads=16, vocab=30522,
                             seq_len=512, tied_embeddings=True)


def fab(gpu: str):
    return from_flags(gpu, 1, "NDR400", None).fabric


def show(title: str, res, rate: float, out: int, n: int = 3) -> None:
    print(f"\n{title}")
    for o in res.options[:n]:
        p = o.point
        m = o.usd_per_mtok(rate, out)
        own = o.usd_per_mtok(rate, out, own=True)
        tpot = f"{p.tpot_p99 * 1e3:.1f}" if p.tpot_p99 else "-"
        print(f"  {o.hardware:16} TP{o.tp} PP{o.pp}: {o.replicas:5} replicas, {o.gpus:5} processors, "
              f"{o.per_replica_rate:8.1f} req/s each, TTFT p99 {p.ttft_p99 * 1e3:6.1f} ms, TPOT p99 {tpot} ms, "
              f"$/Mtok rent {m if m is None else round(m, 3)} own {own if own is None else round(own, 3)}; "
              f"binds: {o.binding}")


def fraud() -> None:
    spec = load_model_spec("llama2-7b")
    t = Traffic(50_000, Lengths(256), Lengths(1))
    for prec in ("bf16", "fp8"):
        res = search(spec, [fab("H100:8"), fab("H200:8")], 50_000, t, quant=Quant(prec, prec), slo_ttft=0.05)
        show(f"1. Llama-2-7B fraud scoring, 256-token transactions, 1 output token, 50,000/s, TTFT p99 <= 50 ms, "
             f"{prec}", res, 50_000, 1)
    # The seed's pod: TP 8 on one 8-GPU node.
    rep = Replica(spec, fab("H100:8"), 8, 1, Quant())
    r, _, why = max_rate(StepModel(rep), t, 512, 0.05, None)
    print(f"  the seed's pod (H100 TP8, bf16): {r:.0f} transactions/s within 50 ms p99 ({why}); "
          f"50,000/s needs {50_000 / r:.0f} such pods")


def big() -> None:
    spec = load_model_spec("llama3-70b")
    t = Traffic(1000, Lengths(512), Lengths(256))
    res = search(spec, [fab("H100:8"), fab("H200:8"), fab("B200:8")], 1000, t, quant=Quant("fp8", "fp8"),
                 slo_ttft=0.5, slo_tpot=0.05)
    show("2. Llama-3-70B, 512 prompt + 256 output tokens, 1,000 req/s, TTFT p99 <= 500 ms, TPOT p99 <= 50 ms, fp8",
         res, 1000, 256, 5)
    res = search(spec, [fab("H100:8")], 1000, t, quant=Quant("fp8", "fp8"))
    show("   the same without SLOs (replicas at 90% of capacity)", res, 1000, 256, 2)


def batching() -> None:
    rep = Replica(load_model_spec("llama2-7b"), fab("H100:8"), 1, 1, Quant())
    step = StepModel(rep)
    mem = replica_memory(rep.spec, rep.gpu, rep.quant, 1, 1, 512 + 256)
    print("\n3. One request at a time vs a 10 ms window vs continuous batching (Llama-2-7B, one H100, bf16; "
          "offered load above capacity so that each batcher runs flat out)")
    for name, s, o, rate in (("fraud scoring, 256 in / 1 out", 256, 1, 3000),
                             ("chat, 512 in / 256 out", 512, 256, 200)):
        t = Traffic(rate, Lengths(s), Lengths(o))
        mb = min(512, mem.max_sequences)
        single = simulate(step, t, mb, mode="single", requests=300)
        window = simulate(step, t, mb, mode="window", window_s=0.01, requests=3000)
        cont = simulate(step, t, mb, mode="continuous", requests=3000)
        print(f"  {name}: one at a time {single.tokens_per_s:8.1f} out tok/s; 10 ms window {window.tokens_per_s:8.1f} "
              f"({window.tokens_per_s / single.tokens_per_s:.1f}x, mean batch {window.mean_batch:.0f}); continuous "
              f"{cont.tokens_per_s:8.1f} ({cont.tokens_per_s / single.tokens_per_s:.1f}x, "
              f"mean batch {cont.mean_batch:.0f})")
        # At a load one request at a time just keeps up with:
        light = Traffic(0.8 * single.tokens_per_s / o, Lengths(s), Lengths(o))
        a = simulate(step, light, mb, mode="single", requests=300)
        b = simulate(step, light, mb, mode="window", window_s=0.01, requests=300)
        print(f"    at {light.rate:.1f} req/s (80% of one-at-a-time capacity): TTFT p99 one at a time "
              f"{a.ttft_p99 * 1e3:.0f} ms, 10 ms window {b.ttft_p99 * 1e3:.0f} ms")


def cpu_vs_gpu() -> None:
    cpu = catalog.cpus.get("EPYC-9654")
    for spec in (BERT_BASE, BERT_LARGE):
        t = Traffic(5000, Lengths(128), Lengths(1))
        res = search(spec, [fab("H100:8"), fab("L40S:8")], 5000, t, slo_ttft=0.02, cpus=[(cpu, 2)])
        gpus = [o for o in res.options if "EPYC" not in o.hardware]
        cpus = [o for o in res.options if "EPYC" in o.hardware]
        print(f"\n4. {spec.name} classifier, 128 tokens, 5,000 req/s, TTFT p99 <= 20 ms")
        show("   cheapest GPU deployments (rent):", type(res)(gpus), 5000, 1, 2)
        show("   CPU nodes (2 x EPYC-9654, FP32):", type(res)(cpus), 5000, 1, 1)
        if not cpus:
            print("   CPU nodes: " + "; ".join(f"{r.hardware}: {r.reason} ({r.detail})"
                                             for r in res.rejected if "EPYC" in r.hardware))


if __name__ == "__main__":
    fraud()
    big()
    batching()
    cpu_vs_gpu()
