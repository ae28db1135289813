"""xPyD splits of the deployment search's answer (``simulator.search.disaggregated``, ``search --disaggregated``).

Proved: for an answer of N replicas, every split of N and of N - 1 instances is simulated and judged;
a split's cost is its instances times the shape's price (the N splits cost what the answer costs);
``meets`` agrees with the SLO figures it reports; its figures are those of the disaggregated simulation
itself; ``best`` is the cheapest split that meets; the command adds the rows to its JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.base.specs import GpuSpec
from simulator.cli import commands as cli
from simulator.cluster.disaggregated import DisaggregatedDeployment, KvLink, Pool
from simulator.search.deployments import search_deployments
from simulator.search.disaggregated import split_counts, verdict, xpyd_alternatives
from simulator.search.evaluate import default_max_model_len, prepare_candidate
from simulator.search.space import SearchSpace, Slo, SloTarget
from simulator.sizing.hf_config import parse_hf_config
from simulator.workload.generators import ArrivalProcess, WorkloadSpec, generate_workload

ROOT = Path(__file__).resolve().parents[2]
LLAMA_8B = ROOT / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
# examples/search_gpus.json's H100 (the catalog's figures and price)
H100 = dict(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
            interconnect_gbps=900, price_per_hour=3.78)
SLO = Slo((SloTarget("ttft", "p90", 0.4), SloTarget("itl", "p90", 0.013)))


@pytest.fixture(scope="module")
def searched():
    model = parse_hf_config(json.loads(LLAMA_8B.read_text()))
    wl = generate_workload(WorkloadSpec(n=120, prompt="normal:2048,512", output="normal:128,32",
                                        arrival=ArrivalProcess("poisson", rate=16, unit="s")), 0)
    space = SearchSpace((GpuSpec(**H100),), tensor_parallel=(1,), precisions=("bf16",), max_num_seqs=(256,),
                        max_replicas=6, routing="least-loaded")
    result = search_deployments(wl, model, space, SLO)
    return wl, model, space, result, xpyd_alternatives(result, wl, model, space, SLO, link=KvLink(50.0, 1e-4))


def test_every_split_of_n_and_n_minus_1_is_judged(searched):
    wl, model, space, result, alt = searched
    n = result.best.replicas
    agg = alt["aggregated"]
    assert n >= 2 and (agg["replicas"], agg["cost_per_hour"], agg["num_gpus"]) == (n, result.best.cost_per_hour, n)
    trial = next(t for t in result.best.trials if t.num_instances == n)
    assert agg["values"] == trial.values and trial.meets
    want = [(x, m - x) for m in sorted({n - 1, n}) for x in range(1, m)]
    assert [(r["prefill_instances"], r["decode_instances"]) for r in alt["splits"]] == want
    for r in alt["splits"]:
        m = r["prefill_instances"] + r["decode_instances"]
        assert r["num_gpus"] == m and r["cost_per_hour"] == pytest.approx(m * 3.78)
        within = all(v is not None and v <= t.max_s for t, v in zip(SLO.targets, r["values"].values()))
        assert r["meets"] == (within and not r["misses"]), r
    costs_n = {r["cost_per_hour"] for r in alt["splits"] if r["num_gpus"] == n}
    assert costs_n and all(c == pytest.approx(result.best.cost_per_hour) for c in costs_n)
    meeting = [r for r in alt["splits"] if r["meets"]]
    assert (alt["best"] is None) == (not meeting)
    if meeting:
        assert alt["best"]["cost_per_hour"] == min(r["cost_per_hour"] for r in meeting)


def test_a_splits_figures_are_the_simulations(searched):
    wl, model, space, result, alt = searched
    row = alt["splits"][-1]
    cand = space.candidates()[result.best.index]
    cfg = prepare_candidate(result.best.index, cand, model, space, default_max_model_len(wl, model), wl, SLO).config
    res = DisaggregatedDeployment(Pool(cfg, row["prefill_instances"], "least-loaded"),
                                  Pool(cfg, row["decode_instances"], "least-loaded"), KvLink(50.0, 1e-4),
                                  kv_bytes_per_token=131072).run(wl)
    assert row["values"]["TTFT p90"] == pytest.approx(res.latency.ttft.p90)
    assert row["values"]["ITL p90"] == pytest.approx(res.latency.itl.p90)
    assert row["transfer_p90_s"] == pytest.approx(res.transfer["p90_s"])


def test_the_verdict_names_the_winner_by_the_rule(searched):
    """Fewer GPUs meeting the SLO: disaggregated; equal GPUs: the lower first SLO figure among those meeting."""
    _, _, _, result, alt = searched
    v, n, first = alt["verdict"], result.best.replicas, SLO.targets[0].label
    cheaper = [r for r in alt["splits"] if r["meets"] and r["num_gpus"] < n]
    same = [r for r in alt["splits"] if r["meets"] and r["num_gpus"] == n]
    if cheaper:
        assert v["winner"] == "disaggregated" and "cheaper than" in v["reason"]
    elif same:
        top = min(same, key=lambda r: r["values"][first])
        assert v["split"] == top["name"]
        assert v["winner"] == ("disaggregated" if top["values"][first] < alt["aggregated"]["values"][first]
                               else "aggregated")
    else:
        assert v["winner"] == "aggregated" and "meets the SLO" in v["reason"]


def test_verdict_cases_on_made_up_rows():
    agg = {"replicas": 4, "cost_per_hour": 15.12, "num_gpus": 4, "values": {"TTFT p90": 0.09, "ITL p90": 0.011},
           "output_tokens_per_s": 4600.0}

    def row(x, y, ttft, meets=True):
        return {"name": f"{x}P{y}D", "num_gpus": x + y, "cost_per_hour": 3.78 * (x + y), "meets": meets,
                "values": {"TTFT p90": ttft, "ITL p90": 0.01}, "misses": [] if meets else ["TTFT p90 too slow"]}

    slo = SLO
    splits = [row(1, 3, 0.5, False), row(2, 2, 0.12)]
    v = verdict({"aggregated": agg, "splits": splits, "best": splits[1]}, slo)
    assert v["winner"] == "aggregated" and v["split"] == "2P2D" and "120 ms for 2P2D against 90 ms" in v["reason"]
    assert v["reason"].endswith("; 2P2D is better on ITL p90 (10 ms against 11 ms)")
    splits[1] = row(2, 2, 0.05)
    assert verdict({"aggregated": agg, "splits": splits, "best": splits[1]}, slo)["winner"] == "disaggregated"
    three = row(1, 2, 0.2)
    v = verdict({"aggregated": agg, "splits": [three, *splits], "best": three}, slo)
    assert v["winner"] == "disaggregated" and v["split"] == "1P2D" and "cheaper than 4 aggregated" in v["reason"]
    v = verdict({"aggregated": agg, "splits": [row(1, 3, 0.5, False)], "best": None}, slo)
    assert v["winner"] == "aggregated" and "no split of 4 GPUs meets the SLO" in v["reason"]


def test_split_counts_filter_the_pool_sizes():
    assert split_counts(4) == [(1, 2), (2, 1), (1, 3), (2, 2), (3, 1)]
    assert split_counts(4, prefill_counts=[1]) == [(1, 2), (1, 3)]
    assert split_counts(4, decode_counts=[2]) == [(1, 2), (2, 2)]
    assert split_counts(2) == [(1, 1)]


def test_single_replica_answers_have_no_split(searched):
    wl, model, space, result, _ = searched
    loose = Slo((SloTarget("ttft", "p90", 60.0),))
    one = search_deployments(wl, model, space, loose)
    assert one.best.replicas == 1 and xpyd_alternatives(one, wl, model, space, loose) is None


def test_search_command_adds_the_splits(tmp_path, capsys):
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps([H100]))
    args = ["search", "--model", str(LLAMA_8B), "--gpus", str(gpus), "--rate", "16", "--duration", "6",
            "--prompt", "normal:2048,512", "--output", "normal:128,32", "--slo", "ttft:p90:0.4",
            "--slo", "itl:p90:0.013", "--tp", "1", "--precision", "bf16", "--max-num-seqs", "256",
            "--max-replicas", "6", "--routing", "least-loaded", "--disaggregated"]
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["disaggregated"] is None or out["disaggregated"]["splits"]
    assert cli.main(args + ["--link-gbps", "0"]) == 2
    assert "--link-gbps: must be > 0" in capsys.readouterr().err
