"""`gpucluster slurm`: submit plans, scripts and benchmarks to Slurm and follow them; import the
job history (sacct) as a trace the simulator replays."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from gpucluster.files import is_file
from gpucluster.cli.render import console, print_json, safe

slurm_app = typer.Typer(help="Submit to Slurm, follow jobs, import sacct history.", no_args_is_help=True)
Timeout = Annotated[float, typer.Option(help="Seconds to wait for each Slurm command")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON")]
MAX_OUTPUT_READ = 64 << 20      # a job's output is searched for a bench result up to this many bytes
MAX_PARTITIONS_BYTES = 16 << 20  # `scontrol show partition -o`: one line of ~1 kB per partition
_OUT_OPT = re.compile(r"^(?:--output(?:=(.*))?|-o(.*))$")
_ERR_OPT = re.compile(r"^(?:--error(?:=(.*))?|-e(.*))$")


def _client(timeout: float):
    from gpucluster.api_args import seconds_option
    from gpucluster.engines.slurm import SlurmClient
    return SlurmClient(timeout=seconds_option(timeout, "--timeout", high=3600))


def _times(wait: float | None, poll: float) -> None:
    """--wait and --poll: finite seconds (a NaN --wait followed forever, inf raised OverflowError)."""
    from gpucluster.api_args import MAX_WAIT_S, seconds_option
    seconds_option(poll, "--poll", high=3600)
    if wait is not None:
        seconds_option(wait, "--wait", high=MAX_WAIT_S)


def _directive_words(text: str) -> list[str]:
    """The words of the #SBATCH lines sbatch reads: those before the first command line."""
    words: list[str] = []
    for line in text.splitlines()[1:] if text.startswith("#!") else text.splitlines():
        s = line.strip()
        if not s:
            continue
        if not s.startswith("#"):
            break
        if s.startswith("#SBATCH"):
            try:
                words += shlex.split(s[len("#SBATCH"):], comments=True)
            except ValueError:
                continue
    return words


def _option_value(words: list[str], pattern: re.Pattern) -> str | None:
    """The last value of an option given as --opt=V, --opt V, -oV or -o V."""
    found = None
    for i, w in enumerate(words):
        m = pattern.match(w)
        if m:
            v = next((g for g in m.groups() if g), None)
            found = v if v is not None else (words[i + 1] if i + 1 < len(words) else None)
    return found


def output_args(script_text: str, sbatch_args: list[str], cwd: Path) -> tuple[list[str], str]:
    """sbatch arguments that make the output path explicit, and that path (%j allowed).

    Slurm 22.05 leaves `standard_output` empty in `squeue --json` unless --output is set, and
    forgets the job (and its StdOut) after MinJobAge; so unless the script or the user names one,
    the job gets Slurm's own default, `slurm-%j.out` in the submit directory, spelled out. stderr
    goes to the same file (Slurm's default too) unless the script says otherwise."""
    words = _directive_words(script_text) + list(sbatch_args)
    out, err = _option_value(words, _OUT_OPT), _option_value(words, _ERR_OPT)
    args = []
    # The job runs in --chdir (relative to the submit folder), and Slurm puts its default output
    # and every relative --output there.
    chdir = _option_value(words, re.compile(r"^(?:--chdir(?:=(.*))?|-D(.*))$"))
    base = (cwd / chdir) if chdir else cwd
    if out is None:
        out = str(base / "slurm-%j.out")
        args.append(f"--output={out}")
        if err is None:
            args.append(f"--error={out}")
    return args, out if os.path.isabs(out) else str(base / out)


def _check_history(text: str) -> None:
    """sacct's answer before it is written: a header line with the fields asked for."""
    from gpucluster.engines.slurm import HISTORY_FIELDS, quote
    from gpucluster.errors import UserError

    first = text.split("\n", 1)[0]
    missing = [f for f in ("JobID", "Submit", "State") if f not in first.split("|")]
    if missing and text.strip():
        raise UserError(f"sacct's output is not `sacct -P` history (no {', '.join(missing)} in its first line: "
                        f"{quote(first, 120)!r}); nothing written")
    if not text.strip():
        raise UserError("sacct printed nothing (not even a header); nothing written "
                        f"(asked for {','.join(HISTORY_FIELDS)})")


def _bench_of(doc: dict | None, source: str) -> tuple[dict | None, str | None]:
    """The job's bench result if it reads as one (every key the table prints), else why not: a
    job's output is untrusted, and a half-written or foreign document must not be a KeyError
    after the job has completed."""
    import math

    from gpucluster.bench.result import read_collective
    from gpucluster.errors import UserError

    if doc is None:
        return None, None
    try:
        read_collective(doc, source)
    except UserError as exc:
        return None, exc.message
    avg = doc.get("avg_busbw_gbps")
    if isinstance(avg, bool) or not isinstance(avg, (int, float)) or not math.isfinite(avg) or avg < 0:
        return None, f"{source}: avg_busbw_gbps: must be a finite number >= 0"
    for i, row in enumerate(doc["rows"]):
        for key in ("count", "type", "redop", "root"):
            if not isinstance(row.get(key), (int, str)) or isinstance(row.get(key), bool):
                return None, f"{source}: rows[{i}].{key}: missing or not a number or name"
    for key in ("backend", "world_size", "nodes"):
        if not isinstance(doc.get(key), (int, str)) or isinstance(doc.get(key), bool):
            return None, f"{source}: {key}: missing"
    return doc, None


def _follow_and_report(client, job_id: int, follow: bool, wait: float | None, poll: float, json_out: bool,
                       stdout: str | None = None) -> None:
    from gpucluster.engines.slurm import expand_output, find_bench_result, read_output, read_tail

    if not follow:
        print_json({"job_id": job_id, "stdout": expand_output(stdout, job_id, "")}) if json_out \
            else console.print(f"submitted job {safe(job_id)}")
        return
    if not json_out:
        console.print(f"submitted job {safe(job_id)}; following")
    st = client.follow(job_id, poll_s=poll, timeout_s=wait, stdout=stdout,
                       on_change=None if json_out else lambda s: console.print(f"  {safe(s.state)}"
                                                                              + (f" ({safe(s.reason)})" if s.reason
                                                                                 else "")))
    bench, tail, bench_error = None, None, None
    if st.stdout:
        tail = read_tail(st.stdout)
        text = read_output(st.stdout, MAX_OUTPUT_READ)
        if text is not None:
            bench, bench_error = _bench_of(find_bench_result(text), st.stdout)
    if json_out:
        print_json({**st.to_json(), "stdout_tail": tail, "bench": bench}
                   | ({"bench_error": bench_error} if bench_error else {}))
    else:
        verdict = "failed" if st.failed else "lost" if st.state == "LOST" else "completed"
        console.print(f"job {safe(job_id)} {verdict}: {safe(st.state)}, {safe(st.exit_text())}"
                      + (f", nodes {safe(st.nodes)}" if st.nodes else "")
                      + (f", output {safe(st.stdout)}" if st.stdout else ""))
        if st.stdout and tail is None:
            console.print(f"  (cannot read {safe(st.stdout)} here: is it on a file system this host shares?)")
        elif tail and st.state != "COMPLETED":
            console.print("  last lines of its output:")
            for line in tail.rstrip("\n").splitlines()[-10:]:
                console.print(f"  | {safe(line)}", highlight=False)
        if bench_error:
            console.print(f"  its bench result does not read: {safe(bench_error[:300])}", highlight=False)
        if bench:
            from gpucluster.cli.nccl_table import print_nccl_table
            print_nccl_table([f"job {job_id}: measured {bench['op']}_perf ({bench['backend']}, srun)",
                              f"{bench['world_size']} ranks on {bench['nodes']} node(s)"], bench["rows"],
                             bench["avg_busbw_gbps"])
    if st.state != "COMPLETED" or bench_error or (bench and bench.get("wrong_total")):
        raise typer.Exit(1)


def _write_temp_script(text: str, prefix: str) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".sbatch")
    with open(fd, "w") as f:
        f.write(text)
    return path


def _submit_and_remove(client, path: str, args: list[str], temporary: bool) -> int:
    """sbatch copies the script when it accepts the job, so a generated file can go right away,
    whether or not sbatch took it."""
    try:
        return client.submit(path, args)
    finally:
        if temporary:
            try:
                os.unlink(path)
            except OSError:
                pass


@slurm_app.command("submit")
def submit(target: Annotated[str, typer.Argument(help="Training plan JSON (an sbatch script is generated) or an "
                                                      "sbatch script")],
           follow: Annotated[bool, typer.Option(help="Follow the job until it ends")] = True,
           wait: Annotated[Optional[float], typer.Option(help="Stop following after this many seconds")] = None,
           poll: Annotated[float, typer.Option(help="Seconds between polls")] = 2.0,
           job_name: Annotated[str, typer.Option(help="Job name for a generated script")] = "train",
           time: Annotated[Optional[str], typer.Option(help="Slurm --time (a generated script: 48:00:00 unless "
                                                            "given)")] = None,
           partition: Annotated[Optional[str], typer.Option(help="Slurm partition")] = None,
           account: Annotated[Optional[str], typer.Option(help="Slurm account")] = None,
           gres_type: Annotated[Optional[str], typer.Option(help="GRES type of a generated script (default: the "
                                                                 "GPU's short name)")] = None,
           script: Annotated[str, typer.Option(help="Training program of a generated script")] = "train.py",
           arg: Annotated[Optional[list[str]], typer.Option("--arg", help="Its extra arguments (repeat)")] = None,
           sbatch_arg: Annotated[Optional[list[str]], typer.Option(help="Extra sbatch option (repeat)")] = None,
           timeout: Timeout = 30.0, json_out: Json = False) -> None:
    """Submit and follow; report the final state and exit code (a killed job is reported as
    failed, exit 1), the end of the job's output, and the benchmark results when the job printed
    them. --time, --partition and --account go into a generated script as `generate slurm` writes
    them, or onto sbatch's command line for a script."""
    from gpucluster.errors import UserError
    from gpucluster.generate.quoting import check_text

    path = Path(target)
    if not is_file(path):
        raise UserError("no such file", file=target)
    _times(wait, poll)
    extra = list(sbatch_arg or [])
    for flag, value in (("--time", time), ("--partition", partition), ("--account", account),
                        ("--gres-type", gres_type)):
        if value is not None:
            check_text(value, flag)
    if time is not None:
        from gpucluster.generate.slurm import check_slurm_time
        check_slurm_time(time)
    if path.suffix == ".json":
        from gpucluster.generate.plan_file import load_plan
        from gpucluster.generate.slurm import SlurmOptions, sbatch_script
        from gpucluster.generate.torchrun import Launch, layout_notes

        opts: dict[str, Any] = {"job_name": job_name, "partition": partition, "account": account,
                                "gres_type": gres_type}
        if time is not None:            # else the generator's own default, as `generate slurm` has it
            opts["time"] = time
        job = load_plan(target)
        for w in layout_notes(job, "megatron")[1]:   # what `generate slurm` would warn about
            print(f"warning: {w}", file=sys.stderr)
        text = sbatch_script(job, Launch(script=script, script_args=tuple(arg or ())), SlurmOptions(**opts))
        script_path, temporary = "", True    # written to a temporary file below
    else:
        if gres_type is not None:
            raise UserError("applies to a generated script (PLAN.json); a script names its own --gres",
                            field="--gres-type")
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise UserError(f"cannot read: {exc.strerror}", file=target) from None
        extra += [f"{flag}={value}" for flag, value in (("--time", time), ("--partition", partition),
                                                         ("--account", account)) if value is not None]
        script_path, temporary = str(path.resolve()), False
    out_args, stdout = output_args(text, extra, Path.cwd())
    client = _client(timeout)
    if temporary:
        script_path = _write_temp_script(text, "gpucluster-")
    job_id = _submit_and_remove(client, script_path, extra + out_args, temporary)
    _follow_and_report(client, job_id, follow, wait, poll, json_out, stdout)


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

    from gpucluster.errors import UserError
    from gpucluster.generate.quoting import check_text, sh, sh_join, slurm_directive

    from gpucluster.api_args import MAX_NODES, count_option
    from gpucluster.units import parse_bytes, size_sweep

    count_option(nodes, "--nodes", 1, MAX_NODES)
    count_option(ntasks_per_node, "--ntasks-per-node", 1, 1024)
    count_option(iters, "--iters", 1, 1_000_000)
    _times(wait, poll)
    try:   # what `bench collective` will refuse in every rank, refused here before a job is queued
        size_sweep(parse_bytes(min_size), parse_bytes(max_size), factor)
    except (ValueError, OverflowError) as exc:
        raise UserError(str(exc)[:200], field="--min/--max/--step-factor") from None
    from gpucluster.bench.collective import OPS
    if op not in OPS:
        raise UserError(f"unknown collective {op[:60]!r} (valid: {', '.join(OPS)})", field="--op")
    exe = Path(sys.executable).parent / "gpucluster"
    exe_s = str(exe) if exe.exists() else shutil.which("gpucluster") or "gpucluster"
    # A loop of links made resolve() raise RuntimeError (a traceback); a missing folder let Slurm
    # start a job whose output it cannot write (found by the fuzzer's `anyopt` kind).
    try:
        folder = Path(out_dir).resolve()
        if not folder.is_dir():
            raise UserError("is not a folder (the job writes its output there)", file=out_dir[:200], field="--out-dir")
    except (OSError, RuntimeError, ValueError) as exc:
        reason = "a loop of symbolic links" if isinstance(exc, RuntimeError) else getattr(exc, "strerror", None) or str(exc)
        raise UserError(f"cannot use: {reason[:200]}", file=out_dir[:200], field="--out-dir") from None
    out = str(folder / "gpucluster-bench-%j.out")
    lines = ["#!/bin/bash", "#SBATCH --job-name=gpucluster-bench", f"#SBATCH --nodes={nodes}",
             f"#SBATCH --ntasks-per-node={ntasks_per_node}", "#SBATCH --exclusive",
             f"#SBATCH --output={slurm_directive(out)}"]
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
    client = _client(timeout)
    job_id = _submit_and_remove(client, _write_temp_script("\n".join(lines) + "\n", "gpucluster-bench-"), [], True)
    _follow_and_report(client, job_id, True, wait, poll, json_out, out)


@slurm_app.command("status")
def status(job_id: Annotated[int, typer.Argument(help="Slurm job id")], timeout: Timeout = 30.0,
           json_out: Json = False) -> None:
    """A job's state from squeue, else sacct, else scontrol."""
    from gpucluster.errors import UserError

    if not 0 < job_id < 2**63:
        raise UserError(f"must be a job id > 0, got {job_id}", field="job_id")
    client = _client(timeout)
    st = client.status(job_id)
    if st is None:
        raise UserError(f"Slurm knows no job {job_id}")
    if st.stdout and "%" in st.stdout:   # squeue gives --output as written (slurm-%j.out): the file's name
        st.stdout = client.output_path(st, None)
    if json_out:
        print_json(st.to_json())
    else:
        console.print(f"job {safe(job_id)} {safe(st.state)} (from {safe(st.source)}); "
                      + (safe(st.exit_text()) if st.done else "still running") + f"; nodes {safe(st.nodes or '-')}",
                      highlight=False)


@slurm_app.command("import")
def import_(out: Annotated[str, typer.Option("--out", "-o", help="Trace file to write (sacct -P format)")],
            since: Annotated[str, typer.Option(help="sacct -S: first day or time")] = "2000-01-01",
            until: Annotated[Optional[str], typer.Option(help="sacct -E: last day or time")] = None,
            scenario: Annotated[Optional[str], typer.Option(help="Also write a scenario YAML that replays it")] = None,
            cluster: Annotated[Optional[str], typer.Option(help="Cluster spec for --scenario")] = None,
            policy: Annotated[str, typer.Option(help="Policy for --scenario")] = "backfill",
            partitions_from: Annotated[str, typer.Option("--partitions", help="For --scenario: the partitions' node sets and tiers from "
                                                         "`scontrol show partition -o` output in a FILE, `live` "
                                                         "(run it here) or `none`")] = "live",
            hostnames: Annotated[Optional[list[str]], typer.Option(
                "--hostnames", help="POOL=HOSTLIST: a pool's Slurm node names in order (repeat; default, for a "
                                    "cluster spec of one pool: the nodes the partitions name)")] = None,
            timeout: Timeout = 30.0, json_out: Json = False) -> None:
    """Turn sacct history into a trace (`gpucluster simulate` reads it with format: sacct). Every job
    keeps its partition, QOS, account, time limit, state, exit code and recorded wait (Start -
    Eligible); `simulate` on the scenario prints simulated against recorded waits per partition.
    The scenario gets the partitions' node sets and PriorityTier (and PriorityJobFactor for
    multifactor) from scontrol. --policy multifactor replays Slurm's priority/multifactor
    (docs/simulator.md, calibration)."""
    import yaml

    from gpucluster.errors import UserError
    from gpucluster.sim.traces.sacct import read_sacct

    from gpucluster.output_file import check_output_path, write_output

    if scenario and not cluster:
        raise UserError("--scenario needs --cluster SPEC", field="--cluster")
    out_path = check_output_path(out, "--out")     # before sacct runs: a folder, a loop of links, a FIFO
    scenario_path = check_output_path(scenario, "--scenario") if scenario else None
    spec = None
    if scenario and cluster:
        # The scenario must replay: a missing cluster or an unknown policy is refused before sacct runs.
        from gpucluster.sim.policies import load_all
        from gpucluster.specs.cluster import load_cluster
        policy = load_all().canonical(policy, field="--policy")
        spec = load_cluster(cluster)
    if since.strip().startswith("-") or (until or "").strip().startswith("-"):
        raise UserError("a date or time, not an option", field="--since/--until")
    pools_names: dict[str, str] = {}
    for h in hostnames or []:
        pool, sep, expr = h.partition("=")
        if not sep or not pool.strip() or not expr.strip():
            raise UserError(f"{h!r} is not POOL=HOSTLIST (e.g. h200=gpu[01-16])", field="--hostnames")
        pools_names[pool.strip()] = expr.strip()
    part_text: str | None = None
    part_source = partitions_from
    if scenario and partitions_from == "live":
        try:
            part_text = _client(timeout)._run(["scontrol", "show", "partition", "-o"]).stdout
        except UserError as exc:   # the history alone can still be replayed: say how
            raise UserError(f"{exc.reason}; to replay without the partitions' node sets and "
                            "tiers, give --partitions none (or a saved `scontrol show partition -o`)",
                            field="--partitions") from None
        part_source = "scontrol show partition -o"
    elif scenario and partitions_from != "none":
        from gpucluster.specs.safe_yaml import open_regular
        fd = open_regular(partitions_from, "saved `scontrol show partition -o` output")
        try:   # the bounded regular-file reader of every spec: /dev/zero, a pipe or 1 GB is one line
            with open(fd, "rb") as f:
                raw = f.read(MAX_PARTITIONS_BYTES + 1)
        except OSError as exc:
            raise UserError(f"cannot read: {exc.strerror}", file=partitions_from, field="--partitions") from None
        if len(raw) > MAX_PARTITIONS_BYTES:
            raise UserError(f"larger than {MAX_PARTITIONS_BYTES >> 20} MiB: not `scontrol show partition -o` "
                            "output", file=partitions_from, field="--partitions")
        part_text = raw.decode("utf-8", "replace")
    text = _client(timeout).history(since, until)
    _check_history(text)
    write_output(out, text, field="--out")   # whole or not at all, and only once it reads as sacct's history
    read = read_sacct(out)
    lines = text.splitlines()
    header = lines[0].split("|") if lines else []
    col = header.index("State") if "State" in header else None
    states: dict[str, int] = {}
    for line in lines[1:]:
        parts = line.split("|")
        if col is not None and len(parts) == len(header) and parts[col].split():
            st = parts[col].split()[0]
            states[st] = states.get(st, 0) + 1
    replay: dict[str, int] = {}
    for j in read.jobs:
        s = getattr(j, "final_state", "completed")
        replay[s] = replay.get(s, 0) + 1
    partitions: dict[str, int] = {}
    for j in read.jobs:
        p = getattr(j, "partition", "") or "(none)"
        partitions[p] = partitions.get(p, 0) + 1
    info: dict[str, Any] = {"trace": out, "rows": read.rows, "jobs": len(read.jobs), "skipped": dict(read.skipped),
            "bad": dict(read.bad), "states": states, "replay_states": replay, "partitions": partitions}
    if scenario and cluster:    # (--scenario without --cluster was refused above)
        assert scenario_path is not None
        base = scenario_path.parent
        doc: dict[str, Any] = {"name": f"sacct-replay-{out_path.stem}",
                               "cluster": os.path.relpath(os.path.realpath(cluster), base), "policy": policy}
        if part_text is not None:
            from gpucluster.sim.traces.slurm_partitions import read_partitions, scenario_fields
            pread = read_partitions(part_text, part_source)
            assert spec is not None
            fields = scenario_fields(pread, {p.name: p.count for p in spec.node_pools}, pools_names,
                                     policy in ("multifactor", "priority-multifactor", "slurm"))
            if "hostnames" in fields:
                doc["hostnames"] = fields["hostnames"]
            if "partition_priority" in fields:
                doc["policy_options"] = {"partition_priority": fields["partition_priority"]}
            doc["queues"] = fields["queues"]
            info["partitions_read"] = pread.report()
            info["partition_summary"] = pread.summary()
        doc["workloads"] = [{"kind": "trace", "name": "sacct", "format": "sacct",
                             "path": os.path.relpath(out_path, base)}]
        write_output(scenario, yaml.safe_dump(doc, sort_keys=False), field="--scenario")
        info["scenario"] = scenario
    if json_out:
        print_json(info)
    else:
        console.print(f"wrote {safe(out)}: {read.rows} jobs in the history, {len(read.jobs)} with GPUs to replay; "
                      f"states {safe(', '.join(f'{k} {v}' for k, v in sorted(states.items())) or '-')}"
                      + (f"; scenario {safe(scenario)}" if scenario else ""), highlight=False)
        if read.skipped or read.bad:   # why rows are not replayed, one line (bad rows with their first line)
            console.print("  " + safe(read.summary().split("; ", 1)[-1]), highlight=False)
        if "partition_summary" in info:   # partitions read, and bad lines by reason with the first one
            console.print("  " + safe(info["partition_summary"]), highlight=False)
