"""Serving (inference) model: memory of a replica, prefill and decode step times, continuous
batching (an analytic queueing model, confirmed by a small discrete-event run), and CPU
inference for small models. Pure functions, no I/O.

- kv_cache:    weight and KV-cache bytes per GPU, precisions, how many sequences fit
- step_time:   prefill and decode step time of one replica (TP x PP) on a fabric
- queueing:    throughput, TTFT and TPOT (p50/p99) under Poisson arrivals
- batcher_sim: discrete-event run of a continuous (or windowed, or one-at-a-time) batcher
- cpu:         transformer inference on CPU sockets (the small-classifier question)
"""
