import json
import subprocess
import sys
from pathlib import Path

import dagster as dg

from assets.evaluation import build_evaluation_assets
from assets.models import build_model_assets
from assets.reproduce import build_reproduce_assets
from conteb.names import FAMILY_OF_STAGE, Stage, StageFamily, stage_group, task_groups
from conteb.reproduce import EXPERIMENT_GROUPS
from pipelines.definitions import build_definitions, llm_configured, task_assets
from pipelines.jobs import choose_executor
from project.config import load_config
from tests.conftest import ROOT

MAX_GROUP = 8  # assets a lineage view shows legibly at its default zoom (1400 x 1000)
MAX_GROUP_NAME = 18  # characters Dagster's zoomed-out graph shows before cutting a name with "…"

STAGES = [
    "source_documents",
    "source_queries",
    "source_quarantine",
    "chunks",
    "chunk_quarantine",
    "paired_queries",
    "pairing_quarantine",
    "answerability",
    "answerability_quarantine",
    "conteb_dataset",
]


def registry(tmp_path: Path, names: list[str], executor: str = "auto") -> Path:
    tasks = "".join(f"  - name: {n}\n    source: {{kind: sample, path: {ROOT / 'data' / 'sample'}}}\n" for n in names)
    path = tmp_path / "conteb.yaml"
    path.write_text(f"execution: {{executor: {executor}}}\ntasks:\n{tasks}")
    return path


def test_one_asset_per_task_and_stage_grouped_by_stage_family(tmp_path: Path) -> None:
    defs = build_definitions(load_config(registry(tmp_path, ["sample", "my-task"])))
    graph = defs.resolve_asset_graph()
    all_keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    # the paper's experiment (its tasks reproduce, reproduce-covidqa, ...): its own group
    experiment = {k for k in all_keys if k.split("/")[0].startswith("reproduce")}
    keys = all_keys - experiment
    curation = {f"{task}/{stage}" for task in ("sample", "my-task") for stage in STAGES}
    evaluation = {"sample/evaluation", "my-task/evaluation", "evaluation_report"}
    assert keys == curation | evaluation
    # the experiment's groups (reproduce_models, reproduce_sources, reproduce_controlled_queries, ...), all outside
    # build_conteb/evaluate_conteb
    groups = {graph.get(dg.AssetKey.from_user_string(k)).group_name for k in experiment}
    assert set(EXPERIMENT_GROUPS) <= groups and all(group.startswith("reproduce_") for group in groups)
    reproduce = defs.resolve_job_def("reproduce_conteb")
    assert {k.to_user_string() for k in reproduce.asset_layer.selected_asset_keys} == experiment
    assert graph.get(dg.AssetKey(["my-task", "chunks"])).group_name == "my_task_sources"
    assert graph.get(dg.AssetKey(["my-task", "conteb_dataset"])).group_name == "my_task_publish"
    assert {graph.get(dg.AssetKey.from_user_string(k)).group_name for k in evaluation} == {"evaluation"}
    check_keys = [key for key in graph.asset_check_keys if not key.asset_key.path[0].startswith("reproduce")]
    checks = {key.name for key in check_keys}
    assert "chunks_match_source" in checks and "metrics_match_trec_eval" in checks
    assert len(check_keys) == 2 * 8 + 2  # eight dataset checks per task, one trec_eval check per evaluation
    build = defs.resolve_job_def("build_conteb")
    assert {k.to_user_string() for k in build.asset_layer.selected_asset_keys} == curation
    evaluate = defs.resolve_job_def("evaluate_conteb")
    assert {k.to_user_string() for k in evaluate.asset_layer.selected_asset_keys} == evaluation


def test_evaluation_is_split_encode_rank_with_the_encode_steps_pool_and_tags(tmp_path: Path) -> None:
    path = registry(tmp_path, ["my-task"])
    path.write_text(
        path.read_text().replace(
            "execution: {executor: auto}",
            "execution: {executor: auto, encode_pool: gpu, encode_op_tags: {dagster-k8s/config: {x: 1}}}",
        )
    )
    evaluation = build_definitions(load_config(path)).resolve_assets_def(dg.AssetKey(["my-task", "evaluation"]))
    ops = {op.name: op for op in evaluation.node_def.node_defs}
    assert list(ops) == ["my_task__evaluation__split", "my_task__evaluation__encode", "my_task__evaluation__rank"]
    encode = ops["my_task__evaluation__encode"]
    assert encode.pool == "gpu" and json.loads(encode.tags["dagster-k8s/config"]) == {"x": 1}  # Dagster stores JSON
    assert ops["my_task__evaluation__rank"].pool is None and not ops["my_task__evaluation__rank"].tags
    assert {key.to_user_string() for key in evaluation.keys_by_input_name.values()} == {"my-task/conteb_dataset"}


def test_executor_is_chosen_by_registry_size(tmp_path: Path) -> None:
    small = load_config(registry(tmp_path, ["a"]))
    assert choose_executor(small) is dg.in_process_executor
    many = load_config(registry(tmp_path, ["a", "b", "c", "d"]))
    assert choose_executor(many).name == "multiprocess"
    forced = load_config(registry(tmp_path, ["a"], executor="multiprocess"))
    assert choose_executor(forced).name == "multiprocess"


def test_the_repository_code_location_loads() -> None:
    from pipelines.definitions import defs

    assert defs.resolve_job_def("build_conteb") is not None


def test_bad_registry_fails_at_load_time_naming_task_and_field(tmp_path: Path) -> None:
    config = tmp_path / "conteb.yaml"
    config.write_text("tasks:\n  - name: squad\n    source: {kind: squad_json, path: nowhere.json}\n")
    env = {"CONTEB_CONFIG": str(config), "PATH": str(Path(sys.executable).parent), "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    run = subprocess.run(
        [sys.executable, "-c", "import pipelines.definitions"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode != 0
    assert "task 'squad' (tasks[0]): source.path: no such file or folder" in run.stderr


def test_workspace_points_at_the_definitions() -> None:
    text = (ROOT / "workspace.yaml").read_text()
    assert "module_name: pipelines.definitions" in text


def test_stage_group_is_task_and_family() -> None:
    assert set(FAMILY_OF_STAGE) == set(Stage)  # every stage has its group
    assert stage_group("sample", Stage.SOURCE) == "sample_sources" and stage_group("x", Stage.CHUNKING) == "x_sources"
    assert stage_group("sample", Stage.PAIRING) == stage_group("sample", Stage.LLM_PAIRING) == "sample_pairing"
    assert stage_group("sample", Stage.REFORMULATION) == stage_group("sample", Stage.THEMES) == "sample_rewrite"
    assert stage_group("my_task", Stage.ANSWERABILITY) == stage_group("my_task", StageFamily.PUBLISH)
    assert stage_group("my_task", StageFamily.REVIEW) == "my_task_review"
    assert task_groups("a") == tuple(f"a_{family}" for family in StageFamily)
    # a task whose name ends like a family still never shares a group with another task
    names = ["a", "a_sources", "a_review", "sources", "review_a"]
    groups = [group for name in names for group in task_groups(name)]
    assert len(groups) == len(set(groups))


def _keys(assets: list[dg.AssetsDefinition]) -> set[str]:
    return {key.to_user_string() for asset in assets for key in asset.keys}


def test_each_job_selects_the_assets_it_selected_before_the_split() -> None:
    """Before the stage groups, ``build_conteb`` selected the group of each task (its ``task_assets``),
    ``reproduce_conteb`` the experiment's; the expected sets are computed from the same builders."""
    config = load_config(ROOT / "conteb.yaml")
    defs = build_definitions(config)
    experiment = config.reproduce_tasks(llm_configured(config))

    def selected(job: str) -> set[str]:
        return {key.to_user_string() for key in defs.resolve_job_def(job).asset_layer.selected_asset_keys}

    build = set().union(*(_keys(task_assets(task)[0]) for task in config.tasks))
    reproduce = set().union(*(_keys(task_assets(task)[0]) for _, task in experiment))
    reproduce |= _keys(build_reproduce_assets(config, experiment))
    assert selected("build_conteb") == build and "sample/reviewed_chunks" in build
    assert selected("reproduce_conteb") == reproduce and "reproduce/paper_comparison" in reproduce
    assert selected("train_insent") == _keys(build_model_assets(config)) == {"insent_model", "finetune_control_model"}
    assert selected("evaluate_conteb") == _keys(build_evaluation_assets(config, ROOT / "data")[0])
    assert not build & reproduce and "sample/evaluation" not in build


def test_every_group_is_small_and_named_by_its_owner() -> None:
    config = load_config(ROOT / "conteb.yaml")
    graph = build_definitions(config).resolve_asset_graph()
    members: dict[str, set[str]] = {}
    for key in graph.get_all_asset_keys():
        members.setdefault(graph.get(key).group_name, set()).add(key.to_user_string())
    assert {group: len(keys) for group, keys in members.items() if len(keys) > MAX_GROUP} == {}
    owned = {group for task in config.tasks for group in task_groups(task.dagster_name)}
    owned |= {group for _, task in config.reproduce_tasks(False) for group in task_groups(task.dagster_name)}
    assert set(members) - owned <= {"evaluation", "training", *EXPERIMENT_GROUPS}
    # a task's assets are in its own groups only
    for task in config.tasks:
        assert {g for g, keys in members.items() if any(k.startswith(f"{task.name}/") for k in keys)} <= {
            *task_groups(task.dagster_name),
            "evaluation",
        }
    # the quickstart's groups keep their whole name in Dagster's zoomed-out graph
    sample = [group for group in members if group.startswith("sample_")] + ["evaluation", "training"]
    assert sample and all(len(group) <= MAX_GROUP_NAME for group in sample)
