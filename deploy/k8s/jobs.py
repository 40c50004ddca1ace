"""Kubernetes pieces for conteb-pipeline, to copy into the project. NOT TESTED HERE (see deploy/README.md).

Nothing imports this file: it needs ``dagster-k8s`` (and ``dagster-celery-k8s`` for the Celery variant) at the
version matching ``dagster``, and a cluster. Where each piece goes:

* ``K8S_EXECUTOR`` (each step in its own pod) or ``CELERY_K8S_EXECUTOR`` (Celery queues in front of the step
  pods, with ``values-celery-k8s.yaml``): returned by ``choose_executor`` / ``evaluate_executor`` in
  ``pipelines/jobs.py`` for ``build_conteb`` and ``evaluate_conteb``.
* ``GPU_OP_TAGS`` and ``GPU_POOL``: on the assets that embed or train (``op_tags=GPU_OP_TAGS, pool=GPU_POOL`` in
  ``assets/evaluation.py``); the pool's limit is the number of GPUs
  (``dagster instance concurrency set gpu <N>``). ``LLM_OP_TAGS`` sends the LLM shard steps to the ``llm`` queue
  (Celery variant) and one node (the SQLite answer cache is shared by processes of one machine only).
* ``pipes_k8s_client`` replaces the ``pipes_subprocess_client`` resource (``pipelines/definitions.py``), and the
  training asset (``assets/models.py``) calls ``pipes_k8s_client.run(context=context,
  base_pod_spec=training_pod_spec(config_file), extras={"model": model_name})``: the same
  ``pipelines.pipes_train`` entry point, under ``torchrun`` on a GPU node.
"""

from __future__ import annotations

from typing import Any

from dagster_k8s import PipesK8sClient, k8s_job_executor

# Shared by every step pod: the data volume and the secrets (the Helm values give the code location the same).
STEP_K8S_CONFIG: dict[str, Any] = {
    "container_config": {"resources": {"requests": {"cpu": "1", "memory": "4Gi"}}},
    "pod_spec_config": {"node_selector": {"conteb/pool": "cpu"}},
}

K8S_EXECUTOR = k8s_job_executor.configured(
    {
        "max_concurrent": 16,  # step pods of one run at once
        "env_secrets": ["conteb-secrets"],
        "env_vars": ["CONTEB_CONFIG=/opt/conteb-pipeline/conteb.yaml", "CONTEB_DATA_DIR=/data"],
        "volume_mounts": [{"name": "data", "mount_path": "/data"}],
        "volumes": [{"name": "data", "persistent_volume_claim": {"claim_name": "conteb-data"}}],
        "step_k8s_config": STEP_K8S_CONFIG,
    },
    name="k8s",
)


def celery_k8s_executor() -> Any:
    """The Celery-on-Kubernetes executor (``dagster-celery-k8s``), configured like ``K8S_EXECUTOR``."""
    from dagster_celery_k8s import celery_k8s_job_executor

    return celery_k8s_job_executor.configured(
        {
            "job_namespace": "dagster",
            "env_secrets": ["conteb-secrets"],
            "volume_mounts": [{"name": "data", "mount_path": "/data"}],
            "volumes": [{"name": "data", "persistent_volume_claim": {"claim_name": "conteb-data"}}],
            "config_source": {"task_acks_late": True, "task_reject_on_worker_lost": True},
        },
        name="celery_k8s",
    )


# A step that embeds (evaluation) on one GPU of a GPU node; the pool bounds how many run at once across runs.
GPU_POOL = "gpu"
GPU_OP_TAGS: dict[str, Any] = {
    "dagster-k8s/config": {
        "container_config": {
            "resources": {
                "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"},
            }
        },
        "pod_spec_config": {
            "node_selector": {"conteb/pool": "gpu"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
}

# The LLM shard steps: one node (the SQLite answer cache), and with the Celery variant the "llm" queue.
LLM_OP_TAGS: dict[str, Any] = {
    "dagster-celery/queue": "llm",
    "dagster-k8s/config": {"pod_spec_config": {"node_selector": {"conteb/llm-cache": "true"}}},
}

pipes_k8s_client = PipesK8sClient()  # in-cluster credentials of the run pod's service account

TRAINING_GPUS = 8


def training_pod_spec(config_file: str, gpus: int = TRAINING_GPUS, image: str = "<registry>/conteb-pipeline:<sha>"):
    """The pod of one training run: ``torchrun`` data-parallel over ``gpus`` GPUs of one node (the loss per
    device, as in the paper: ``training/distributed.py``), the Pipes entry point of the local launcher."""
    return {
        "containers": [
            {
                "name": "train",
                "image": image,
                "command": [
                    "torchrun",
                    f"--nproc-per-node={gpus}",
                    "-m",
                    "pipelines.pipes_train",
                    "--config",
                    config_file,  # written under /data by the asset, so the pod sees it
                ],
                "env": [{"name": "CONTEB_DATA_DIR", "value": "/data"}],
                "env_from": [{"secret_ref": {"name": "conteb-secrets"}}],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"cpu": str(4 * gpus)}},
                "volume_mounts": [
                    {"name": "data", "mount_path": "/data"},
                    {"name": "shm", "mount_path": "/dev/shm"},  # NCCL and DataLoader workers need a large /dev/shm
                ],
            }
        ],
        "volumes": [
            {"name": "data", "persistent_volume_claim": {"claim_name": "conteb-data"}},
            {"name": "shm", "empty_dir": {"medium": "Memory", "size_limit": "64Gi"}},
        ],
        "node_selector": {"conteb/pool": "gpu"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "restart_policy": "Never",
    }
