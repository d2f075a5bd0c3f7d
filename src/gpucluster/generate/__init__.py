"""Job generators: from a training plan (`gpucluster plan train --json`) to the files the engines
run: an sbatch script, a torchrun command, a DeepSpeed config, a Kubernetes Job, Kueue objects.

Every string a user typed (job, cluster, queue and script names, arguments) reaches a shell only
through `shlex.quote`, a Slurm directive only backslash-escaped, YAML and JSON only through their
serialisers; Kubernetes object names are reduced to RFC 1123 with the literal name kept in an
annotation."""
