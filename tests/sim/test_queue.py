"""The wait queue: sorted, lazy removal, and one live entry per queued job."""

from __future__ import annotations

from gpucluster.sim.jobs import PENDING, RUNNING, Job
from gpucluster.sim.queue import JobQueue


def _job(i: int, submit: float) -> Job:
    j = Job(id=i, cls="c", kind="train", gpus=1, submit=submit, work=10.0)
    j.seq = i
    return j


def test_a_job_preempted_and_queued_again_before_a_compaction_is_listed_once():
    q = JobQueue(lambda j: (j.submit,))
    a, b = _job(1, 0.0), _job(2, 1.0)
    q.push(a)
    q.push(b)
    a.state = RUNNING          # started: the entry stays until a compaction
    q.removed(a)
    a.state = PENDING          # preempted: back in the queue
    q.push(a)
    assert list(q) == [a, b] and len(q) == 2 and q[0:5] == [a, b]


def test_order_and_compaction_keep_only_the_pending_jobs():
    q = JobQueue(lambda j: (-j.submit,))
    jobs = [_job(i, float(i)) for i in range(200)]
    for j in jobs:
        q.push(j)
    for j in jobs[:150]:
        j.state = RUNNING
        q.removed(j)
    assert list(q) == jobs[:149:-1] and len(q) == 50 and q.first() is jobs[-1]
