"""`gpucluster slurm`: submit plans, scripts and benchmarks to Slurm and follow them; import the
job history (sacct) as a trace the simulator replays."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpucluster.cli.render import console, print_json

slurm_app = typer.Typer(help="Submit to Slurm, follow jobs, import sacct history.", no_args_is_help=True)
Timeout = Annotated[float, typer.Option(help="Seconds to wait for each Slurm command")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON")]


def _client(timeout: float):
    from gpucluster.engines.slurm import SlurmClient
    return SlurmClient(timeout=timeout)


def _follow_and_report(client, job_id: int, follow: bool, wait: float | None, poll: float, json_out: bool) -> None:
    from rich.markup import escape

    from gpucluster.engines.slurm import find_bench_result

    if not follow:
        print_json({"job_id": job_id}) if json_out else console.print(f"submitted job {job_id}")
        return
    if not json_out:
        console.print(f"submitted job {job_id}; following")
    st = client.follow(job_id, poll_s=poll, timeout_s=wait,
                       on_change=None if json_out else lambda s: console.print(f"  {s.state}"
                                                                              + (f" ({escape(s.reason)})" if s.reason
                                                                                 and s.reason != "None" else "")))
    bench = None
    if st.stdout:
        try:
            with open(st.stdout, errors="replace") as f:
                bench = find_bench_result(f.read())
        except OSError:
            pass
    if json_out:
        print_json({**st.to_json(), "bench": bench})
    else:
        verdict = "failed" if st.failed else "lost" if st.state == "LOST" else "completed"
        console.print(f"job {job_id} {verdict}: {st.state}, exit code {st.exit_code or '?'}"
                      + (f", nodes {escape(st.nodes)}" if st.nodes else "")
                      + (f", output {escape(st.stdout)}" if st.stdout else ""))
        if bench:
            from gpucluster.cli.nccl_table import print_nccl_table
            print_nccl_table([f"job {job_id}: measured {bench['op']}_perf ({bench['backend']}, srun)",
                              f"{bench['world_size']} ranks on {bench['nodes']} node(s)"], bench["rows"],
                             bench["avg_busbw_gbps"])
    if st.state != "COMPLETED" or (bench and bench.get("wrong_total")):
        raise typer.Exit(1)


@slurm_app.command("submit")
def submit(target: Annotated[str, typer.Argument(help="Training plan JSON (an sbatch script is generated) or an "
                                                      "sbatch script")],
           follow: Annotated[bool, typer.Option(help="Follow the job until it ends")] = True,
           wait: Annotated[Optional[float], typer.Option(help="Stop following after this many seconds")] = None,
           poll: Annotated[float, typer.Option(help="Seconds between polls")] = 2.0,
           job_name: Annotated[str, typer.Option(help="Job name for a generated script")] = "train",
           script: Annotated[str, typer.Option(help="Training program of a generated script")] = "train.py",
           arg: Annotated[Optional[list[str]], typer.Option("--arg", help="Its extra arguments (repeat)")] = None,
           sbatch_arg: Annotated[Optional[list[str]], typer.Option(help="Extra sbatch option (repeat)")] = None,
           timeout: Timeout = 30.0, json_out: Json = False) -> None:
    """Submit and follow; report the final state (a killed job is reported as failed, exit 1) and
    the benchmark results when the job printed them."""
    import tempfile
    from pathlib import Path

    from gpucluster.errors import UserError

    path = Path(target)
    if not path.is_file():
        raise UserError("no such file", file=target)
    if path.suffix == ".json":
        from gpucluster.generate.plan_file import load_plan
        from gpucluster.generate.slurm import SlurmOptions, sbatch_script
        from gpucluster.generate.torchrun import Launch

        text = sbatch_script(load_plan(target), Launch(script=script, script_args=tuple(arg or ())),
                             SlurmOptions(job_name=job_name))
        fd, path_s = tempfile.mkstemp(prefix="gpucluster-", suffix=".sbatch")
        with open(fd, "w") as f:
            f.write(text)
    else:
        path_s = str(path.resolve())
    client = _client(timeout)
    job_id = client.submit(path_s, list(sbatch_arg or []))
    _follow_and_report(client, job_id, follow, wait, poll, json_out)


@slurm_app.command("bench")
def bench(nodes: Annotated[int, typer.Option(help="Nodes")] = 2,
          ntasks_per_node: Annotated[int, typer.Option(help="Ranks per node (one per GPU)")] = 1,
          gres: Annotated[Optional[str], typer.Option(help="GPUs per node to request, e.g. gpu:h200:8")] = None,
          partition: Annotated[Optional[str], typer.Option(help="Partition")] = None,
          op: Annotated[str, typer.Option(help="Collective")] = "all_reduce",
          min_size: Annotated[str, typer.Option("--min", "-b")] = "1M",
          max_size: Annotated[str, typer.Option("--max", "-e")] = "64M",
          factor: Annotated[int, typer.Option("--step-factor", "-f")] = 4,
          iters: Annotated[int, typer.Option()] = 10,
          master_addr: Annotated[Optional[str], typer.Option(help="Rendezvous address (default: the first node)")] = None,
          out_dir: Annotated[str, typer.Option(help="Where the job writes its output")] = ".",
          wait: Annotated[Optional[float], typer.Option(help="Stop following after this many seconds")] = None,
          poll: Annotated[float, typer.Option(help="Seconds between polls")] = 1.0,
          timeout: Timeout = 30.0, json_out: Json = False) -> None:
    """Run `bench collective` across nodes as a Slurm job (srun, one rank per task) and print its table."""
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    from gpucluster.errors import UserError
    from gpucluster.generate.quoting import check_text, sh, sh_join, slurm_directive

    if nodes < 1 or ntasks_per_node < 1:
        raise UserError("--nodes and --ntasks-per-node must be >= 1")
    exe = Path(sys.executable).parent / "gpucluster"
    exe_s = str(exe) if exe.exists() else shutil.which("gpucluster") or "gpucluster"
    out = Path(out_dir).resolve()
    lines = ["#!/bin/bash", "#SBATCH --job-name=gpucluster-bench", f"#SBATCH --nodes={nodes}",
             f"#SBATCH --ntasks-per-node={ntasks_per_node}", "#SBATCH --exclusive",
             f"#SBATCH --output={slurm_directive(str(out / 'gpucluster-bench-%j.out'))}"]
    if gres:
        lines.append(f"#SBATCH --gres={slurm_directive(check_text(gres, '--gres'))}")
    if partition:
        lines.append(f"#SBATCH --partition={slurm_directive(check_text(partition, '--partition'))}")
    lines += ["set -euo pipefail",
              (f"export MASTER_ADDR={sh(check_text(master_addr, '--master-addr'))}" if master_addr else
               'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"'),
              "export MASTER_PORT=$((29500 + SLURM_JOB_ID % 1000))",
              "srun --kill-on-bad-exit=1 " + sh_join([exe_s, "bench", "collective", "--json", "--op", op, "--min",
                                                      min_size, "--max", max_size, "--step-factor", str(factor),
                                                      "--iters", str(iters)])]
    fd, script = tempfile.mkstemp(prefix="gpucluster-bench-", suffix=".sbatch")
    with open(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    client = _client(timeout)
    job_id = client.submit(script)
    _follow_and_report(client, job_id, True, wait, poll, json_out)


@slurm_app.command("status")
def status(job_id: Annotated[int, typer.Argument(help="Slurm job id")], timeout: Timeout = 30.0,
           json_out: Json = False) -> None:
    """A job's state from squeue, else sacct, else scontrol."""
    from gpucluster.errors import UserError

    st = _client(timeout).status(job_id)
    if st is None:
        raise UserError(f"Slurm knows no job {job_id}")
    if json_out:
        print_json(st.to_json())
    else:
        console.print(f"job {job_id} {st.state} (from {st.source}); exit code {st.exit_code or '-'}; "
                      f"nodes {st.nodes or '-'}")


@slurm_app.command("import")
def import_(out: Annotated[str, typer.Option("--out", "-o", help="Trace file to write (sacct -P format)")],
            since: Annotated[str, typer.Option(help="sacct -S: first day or time")] = "2000-01-01",
            until: Annotated[Optional[str], typer.Option(help="sacct -E: last day or time")] = None,
            scenario: Annotated[Optional[str], typer.Option(help="Also write a scenario YAML that replays it")] = None,
            cluster: Annotated[Optional[str], typer.Option(help="Cluster spec for --scenario")] = None,
            policy: Annotated[str, typer.Option(help="Policy for --scenario")] = "backfill",
            timeout: Timeout = 30.0, json_out: Json = False) -> None:
    """Turn sacct history into a trace (`gpucluster simulate` reads it with format: sacct)."""
    import os
    from pathlib import Path

    import yaml

    from gpucluster.errors import UserError
    from gpucluster.sim.traces.sacct import read_sacct

    if scenario and not cluster:
        raise UserError("--scenario needs --cluster SPEC", field="--cluster")
    text = _client(timeout).history(since, until)
    Path(out).write_text(text)
    read = read_sacct(out)
    states: dict[str, int] = {}
    for line in text.splitlines()[1:]:
        parts = line.split("|")
        if len(parts) > 8:
            states[parts[8].split()[0]] = states.get(parts[8].split()[0], 0) + 1
    info = {"trace": out, "rows": read.rows, "jobs": len(read.jobs), "skipped": dict(read.skipped),
            "bad": dict(read.bad), "states": states}
    if scenario:
        base = Path(scenario).resolve().parent
        doc = {"name": f"sacct-replay-{Path(out).stem}", "cluster": os.path.relpath(Path(cluster).resolve(), base),
               "policy": policy, "workloads": [{"kind": "trace", "name": "sacct", "format": "sacct",
                                                "path": os.path.relpath(Path(out).resolve(), base)}]}
        Path(scenario).write_text(yaml.safe_dump(doc, sort_keys=False))
        info["scenario"] = scenario
    if json_out:
        print_json(info)
    else:
        console.print(f"wrote {out}: {read.rows} jobs in the history, {len(read.jobs)} with GPUs to replay; "
                      f"states {', '.join(f'{k} {v}' for k, v in sorted(states.items())) or '-'}"
                      + (f"; scenario {scenario}" if scenario else ""))
