"""``python -m simulator``: one-line errors with status 2, workload files, run and sweep."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simulator.cli import commands as cli
from simulator.engine.results import REQUEST_FIELDS, SimResult

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "workloads"


def sim(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "simulator", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc, fragment):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert fragment in lines[0]
    assert proc.stdout == ""


# ---------------------------------------------------------------- errors (subprocess)

def test_help_explains_every_subcommand_and_option():
    out = sim("--help").stdout
    for word in ("run", "sweep", "workload"):
        assert word in out
    wl = sim("workload", "--help").stdout
    for opt in ("--n", "--prompt", "--output", "--arrival", "--unit", "--shared-prefix-len",
                "--shared-prefix-frac", "--num-prefixes", "--turns", "--think-time", "--seed", "tokens"):
        assert opt in wl
    run = sim("run", "--help").stdout
    for opt in ("--workload", "--config", "--steps", "--max-step-points", "--output"):
        assert opt in run
    assert "--grid" in sim("sweep", "--help").stdout


def test_missing_workload_file(tmp_path):
    assert_one_line_error(sim("run", "--workload", tmp_path / "no.json", "--config", DATA / "tiny_config.json"),
                          "no such file")


def test_invalid_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert_one_line_error(sim("run", "--workload", bad, "--config", DATA / "tiny_config.json"), "invalid JSON")
    assert_one_line_error(sim("run", "--workload", DATA / "tiny_oracle.json", "--config", bad), "invalid JSON")


def test_unknown_config_field(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"num_gpu_blocks": 100, "colour": "red"}')
    assert_one_line_error(sim("run", "--workload", DATA / "tiny_oracle.json", "--config", cfg),
                          "colour: unknown config field")


def test_impossible_config_value(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"num_gpu_blocks": -5}')
    assert_one_line_error(sim("run", "--workload", DATA / "tiny_oracle.json", "--config", cfg), "num_gpu_blocks")


def test_bad_trace_names_line_and_column(tmp_path):
    t = tmp_path / "t.csv"
    t.write_text("arrival_time,prompt_tokens,output_tokens\n0,ten,5\n")
    assert_one_line_error(sim("run", "--workload", t, "--config", DATA / "tiny_config.json"),
                          "t.csv line 2, column prompt_tokens")


def test_unknown_grid_field_and_bad_grid():
    assert_one_line_error(sim("sweep", "--workload", DATA / "tiny_oracle.json", "--grid", "colour=1,2"),
                          "--grid colour: unknown config field")
    assert_one_line_error(sim("sweep", "--workload", DATA / "tiny_oracle.json", "--grid", "num_gpu_blocks"),
                          "expected FIELD=V1,V2")
    assert_one_line_error(sim("sweep", "--workload", DATA / "tiny_oracle.json", "--grid", "num_gpu_blocks=1,100"),
                          "num_gpu_blocks")


def test_usage_errors_are_one_line_with_status_2():
    assert_one_line_error(sim(), "required")
    assert_one_line_error(sim("workload", "--bogus"), "unrecognized arguments: --bogus")
    assert_one_line_error(sim("workload", "--n", "many"), "invalid int value")


@pytest.mark.parametrize("args, fragment", [
    (["--n", "0"], "n: must be"),
    (["--n", "2000001"], "n: must be"),
    (["--prompt", "normal:5"], "--prompt: normal takes 2"),
    (["--prompt", "zipf:1"], "--prompt: unknown distribution 'zipf'"),
    (["--prompt", "const:20000000"], "--prompt.value"),
    (["--arrival", "poisson:-1"], "arrival.rate"),
    (["--shared-prefix-len", "512"], "--shared-prefix-len and --shared-prefix-frac go together"),
    (["--shared-prefix-len", "512", "--shared-prefix-frac", "1.5"], "prefixes.fraction"),
    (["--prefix-group", "512"], "--prefix-group '512'"),
    (["--turns", "const:3", "--think-time", "-2"], "turns.think_time"),
    (["--prompt", "empirical:/no/such/lengths.txt"], "cannot read empirical file"),
])
def test_workload_option_errors(args, fragment):
    assert_one_line_error(sim("workload", *args), fragment)


# ---------------------------------------------------------------- workload files

def test_workload_writes_oracle_compact_json_reproducibly(tmp_path):
    args = ["workload", "--n", 50, "--prompt", "normal:512,128", "--output", "normal:256,64",
            "--arrival", "poisson:4", "--shared-prefix-len", 64, "--shared-prefix-frac", 0.8, "--seed", 3]
    a, b = sim(*args), sim(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    d = json.loads(a.stdout)
    assert d["seed"] == 3 and len(d["prefixes"]["p0"]) == 64
    assert len(d["requests"]) == 50
    assert sum("prefix" in r for r in d["requests"]) == 40
    assert set(d["requests"][0]) <= {"id", "arrival_step", "max_tokens", "prompt_len", "prefix"}
    assert d["generator"]["spec"]["arrival"]["rate"] == 4.0
    assert sim(*args[:-1], 4).stdout != a.stdout
    out = tmp_path / "wl.json"
    assert sim(*args, "--out", out).returncode == 0
    assert out.read_text() == a.stdout


def test_workload_in_seconds_and_multi_turn():
    p = sim("workload", "--n", 12, "--arrival", "poisson:2", "--unit", "s", "--turns", "const:3",
            "--user-tokens", "const:10", "--seed", 1)
    assert p.returncode == 0, p.stderr
    reqs = json.loads(p.stdout)["requests"]
    assert all("arrival_time" in r for r in reqs)
    children = [r for r in reqs if "parent" in r]
    assert len(children) == 8
    by_id = {r["id"]: r for r in reqs}
    for r in children:
        par = by_id[r["parent"]]
        assert r["prompt_len"] == par["prompt_len"] + par["max_tokens"] + 10


# ---------------------------------------------------------------- run / sweep plumbing (fake engine)

def fake_result(config, n):
    """n requests that never ran, totals that name the config (and a NaN), one step point."""
    requests = {col: np.zeros(n, np.int64) for col in REQUEST_FIELDS}
    requests.update(id=tuple(map(str, range(n))), status=("waiting",) * n)
    return SimResult(totals={"finished": n, "num_gpu_blocks": config.num_gpu_blocks,
                             "prefix": config.enable_prefix_caching, "hit_rate": np.float64("nan")},
                     requests=requests, steps={"kv_usage": np.array([0.5])})


@pytest.fixture
def fake_engine(monkeypatch):
    calls = []

    def simulate(workload, configs, record_steps=False, max_step_points=None, progress=None, processes=1):
        calls.append((workload, list(configs), record_steps, max_step_points))
        return [fake_result(c, workload.n) for c in configs]

    def load_workload(data):
        from simulator.workload.requests import Workload
        reqs = data["requests"]
        return Workload(prompt_len=np.array([r["prompt_len"] for r in reqs]),
                        output_len=np.array([r["max_tokens"] for r in reqs]),
                        arrival=np.array([r.get("arrival_step", 0) for r in reqs]),
                        ids=tuple(r["id"] for r in reqs))

    monkeypatch.setattr("simulator.batch.simulate", simulate)
    monkeypatch.setattr("simulator.workload.oracle_io.load_workload", load_workload)
    return calls


def test_run_prints_totals_and_requests_without_steps(fake_engine, capsys):
    assert cli.main(["run", "--workload", str(DATA / "steps.jsonl"), "--config", str(DATA / "tiny_config.json")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) == {"totals", "requests"} and d["totals"]["finished"] == 4
    assert d["totals"]["hit_rate"] is None  # NaN is written as null
    (_, configs, record_steps, _), = fake_engine
    assert configs[0].num_gpu_blocks == 64 and record_steps is False


def test_run_with_steps_and_output_file(fake_engine, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli.main(["run", "--workload", str(DATA / "chat.csv"), "--config", str(DATA / "tiny_config.json"),
                     "--steps", "--max-step-points", "50", "--output", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert "steps" in json.loads(out.read_text())
    assert fake_engine[0][2:] == (True, 50)


def test_sweep_runs_the_grid_as_one_batched_call(fake_engine, capsys):
    assert cli.main(["sweep", "--workload", str(DATA / "tiny_oracle.json"), "--config", str(DATA / "tiny_config.json"),
                     "--grid", "num_gpu_blocks=100,200,300", "--grid", "enable_prefix_caching=true,false"]) == 0
    assert len(fake_engine) == 1
    configs = fake_engine[0][1]
    assert [(c.num_gpu_blocks, c.enable_prefix_caching) for c in configs] == [
        (100, True), (100, False), (200, True), (200, False), (300, True), (300, False)]
    assert all(c.block_size == 16 and c.max_num_seqs == 4 for c in configs)  # base config kept
    d = json.loads(capsys.readouterr().out)
    assert d["grid"] == {"num_gpu_blocks": [100, 200, 300], "enable_prefix_caching": [True, False]}
    assert d["points"][1] == {"params": {"num_gpu_blocks": 100, "enable_prefix_caching": False},
                              "totals": {"finished": 8, "num_gpu_blocks": 100, "prefix": False, "hit_rate": None}}


def test_sweep_csv_and_step_time_model_fields(fake_engine, capsys):
    assert cli.main(["sweep", "--workload", str(DATA / "tiny_oracle.json"), "--csv",
                     "--grid", "step_time_model.base_s=0.01,0.02"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "step_time_model.base_s,finished,num_gpu_blocks,prefix,hit_rate"
    assert lines[1].startswith("0.01,8,")
    assert [c.step_time_model.base_s for c in fake_engine[0][1]] == [0.01, 0.02]


def test_multi_turn_parent_survives_a_reader_that_ignores_it(fake_engine, tmp_path, capsys):
    wl = tmp_path / "wl.json"
    assert cli.main(["workload", "--n", "9", "--turns", "const:3", "--out", str(wl)]) == 0
    w = cli.load_workload_file(str(wl))
    assert (w.parent >= 0).sum() == 6


def test_internal_errors_are_one_line_with_status_1(monkeypatch, capsys):
    def boom(workload, configs, **kw):
        raise RuntimeError("kaput\nsecond line")

    monkeypatch.setattr("simulator.batch.simulate", boom)
    assert cli.main(["run", "--workload", str(DATA / "chat.csv"), "--config", str(DATA / "tiny_config.json")]) == 1
    err = "".join(line for line in capsys.readouterr().err.splitlines(True) if not line.startswith("note: "))
    assert err.count("\n") == 1 and err.startswith("error: internal error (RuntimeError: kaput second line)")


# ---------------------------------------------------------------- real engine, small workload

def test_real_run_on_a_small_oracle_workload():
    p = sim("run", "--workload", DATA / "tiny_oracle.json", "--config", DATA / "tiny_config.json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["totals"]["finished"] == 8
    assert [r["id"] for r in d["requests"]] == [str(i) for i in range(8)]
    assert "steps" not in d
    p = sim("run", "--workload", DATA / "tiny_oracle.json", "--config", DATA / "tiny_config.json", "--steps")
    assert "steps" in json.loads(p.stdout)


def test_real_sweep_and_generated_workload(tmp_path):
    wl = tmp_path / "wl.json"
    assert sim("workload", "--n", 40, "--prompt", "normal:200,50", "--output", "normal:50,10",
               "--arrival", "poisson:2", "--shared-prefix-len", 32, "--shared-prefix-frac", 0.5,
               "--out", wl).returncode == 0
    p = sim("sweep", "--workload", wl, "--grid", "num_gpu_blocks=40,400", "--grid", "enable_prefix_caching=true,false")
    assert p.returncode == 0, p.stderr
    points = json.loads(p.stdout)["points"]
    assert len(points) == 4 and all(pt["totals"]["finished"] == 40 for pt in points)
    assert points[0]["totals"]["preemptions"] >= points[2]["totals"]["preemptions"]
    # spread over two worker processes: the same output
    p2 = sim("sweep", "--workload", wl, "--grid", "num_gpu_blocks=40,400", "--grid", "enable_prefix_caching=true,false",
             "--processes", 2)
    assert p2.returncode == 0, p2.stderr
    assert p2.stdout == p.stdout


def test_sweep_processes_out_of_range_is_one_clear_error(tmp_path):
    wl = tmp_path / "wl.json"
    assert sim("workload", "--n", 5, "--out", wl).returncode == 0
    for bad in ("-1", "65"):
        p = sim("sweep", "--workload", wl, "--grid", "num_gpu_blocks=40,400", "--processes", bad)
        assert p.returncode == 2
        assert p.stderr.strip().count("\n") == 0 and "--processes" in p.stderr, p.stderr
