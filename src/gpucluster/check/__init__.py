"""`gpucluster check`: a rule engine that reads a cluster spec and job files and reports what is
wrong, with the numbers behind each finding and the fix.

- findings.py: `Finding` (rule id, severity, title, evidence numbers, fix, file:line)
- jobs/: one parser per job-file format (sbatch and shell command lines with torchrun,
  DeepSpeed JSON, Kubernetes YAML, NCCL environment files) into one `JobFile` shape
- rules/: one module per rule, each registered by id in `rules.RULES`
- context.py: what rules read (spec, jobs, model) and the shared, cached estimates
- engine.py: runs the rules, sorts findings, turns them into an exit code
"""

from gpucluster.callable_module import make_callable

make_callable(__name__, "gpucluster.check.request:check")   # gpucluster.check(...) is the API function too
