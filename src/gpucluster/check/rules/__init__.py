"""Check rules, one module per rule; importing this package registers them all in `RULES`."""

from gpucluster.check.rules import (air_cooling, checkpoint_interval, checkpoint_tier, deepspeed_batch,  # noqa: F401
                                    ethernet_training, job_parse, k8s_gpus, model_fit, nccl_debug, nccl_ib_disabled,
                                    nccl_socket_ifname, oversubscribed_fabric, power_feed, rack_power, sbatch_exclusive,
                                    sbatch_gres, scale_out_bandwidth, storage_feed,
                                    training_checkpoint)
from gpucluster.check.rules.base import RULES, Rule, rule

__all__ = ["RULES", "Rule", "rule"]
