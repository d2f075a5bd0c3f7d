"""The serving model's two fitted constants, one per phase (no factor divides both phases).

Everything else in a step is measured kernels (serving_kernels.yaml, the chip's microbenchmarks)
or a documented engine default (engines.yaml). What remains is fitted on the public serving files
(shared/validation/inference-*.yaml) by `python benchmarks/inference_accuracy.py --fit`, which also
reports each source's leave-one-source-out error (docs/serving.md):

- PREFILL_FIXED_S: per prefill (a step that runs prompts): the request's admission, tokenisation
  hand-off, the context-phase kernels' launches (prefills do not replay CUDA graphs) and the first
  token's sampling and return.
- STEP_HOST_S: host work per engine step (scheduling, input preparation, sampling) for a case or
  plan that names no engine: the engines behind the public runs differ (a vLLM V0 step costs about
  1 ms of host time, gpt-fast's compiled loop a fraction of that), so an unnamed engine takes the
  value that fits them together. A named engine takes its own documented host cost (engines.yaml).

DECODE_LAYER_S stays an estimate, not a fit: the ~6 small kernels per layer around the GEMMs and
attention that the measured kernel tables do not hold (norms, rotary embedding and KV-cache write,
activation, residual adds) at 1.5 us each under CUDA graphs.

Each is fitted on its own phase's measurements (PREFILL_FIXED_S on the TTFT rows, STEP_HOST_S on the
latencies and throughputs, with the cases as written: no engine named). The values below are
in-sample fits on all public serving cases (labelled as such in docs), with each source's
leave-one-source-out error in docs/serving.md.
"""

# The validation files the constants were fitted on: their cases are in-sample (validate/in_sample.py).
FITTED_ON = ("inference-public.yaml", "inference-serving-public.yaml")

PREFILL_FIXED_S = 2.0e-3   # fitted (in-sample), see docs/serving.md
STEP_HOST_S = 2.5e-4      # fitted (in-sample), see docs/serving.md
DECODE_LAYER_S = 9e-6    # estimate (see above), not fitted
