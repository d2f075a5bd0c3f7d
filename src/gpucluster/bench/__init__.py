"""Benchmarks on the real machine: collectives through torch.distributed (gloo on CPU, NCCL on
GPU), GEMM and HBM on a GPU, storage; and the diagnosis that compares them with the model."""
