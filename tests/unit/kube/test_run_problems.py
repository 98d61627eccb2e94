"""Area of concern: a pod that cannot be scheduled or started is named with its reason, the way
the scheduler and the kubelet write it, and a pending pod no scheduler took is told apart."""

from __future__ import annotations

from dsx.kube import jobs


def _pod(status: dict, spec: dict | None = None) -> dict:
    return {"metadata": {"name": "p"}, "spec": spec or {}, "status": status}


def test_unschedulable_carries_the_schedulers_message() -> None:
    pod = _pod(
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
                }
            ],
        }
    )
    assert jobs.problem(pod) == "Unschedulable: 0/8 nodes are available: 8 Insufficient nvidia.com/gpu."


def test_start_problems_of_containers_and_init_containers_are_named() -> None:
    waiting = {"state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}}}
    pod = _pod(
        {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "initContainerStatuses": [waiting],
        },
        {"nodeName": "n"},
    )
    assert jobs.problem(pod) == 'ImagePullBackOff: Back-off pulling image "x"'
    creating = {"state": {"waiting": {"reason": "ContainerCreating"}}}
    fine = _pod(
        {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [creating],
        },
        {"nodeName": "n"},
    )
    assert jobs.problem(fine) == ""  # on its way
    assert jobs.problem(_pod({"phase": "Running"}, {"nodeName": "n"})) == ""


def test_a_pod_no_scheduler_took_names_the_scheduler() -> None:
    pod = _pod({"phase": "Pending"}, {"schedulerName": "kai-scheduler"})
    assert jobs.problem(pod).startswith("NotScheduled: no scheduler has taken the pod (schedulerName kai-scheduler")
