"""`lenbench export mlflow` / `wandb`: runs replayed into the trackers' offline stores and read back.

MLflow: a local ``file:`` store in tmp_path (MLflow 3 keeps it behind MLFLOW_ALLOW_FILE_STORE), read back
with `MlflowClient`. W&B: ``mode="offline"`` into tmp_path, read back from the run's transaction log
(the ``.wandb`` file: a LevelDB-style log of ``wandb_internal_pb2.Record`` messages)."""

import json
import struct
import sys

import pytest
from export_rows import tiny_rows

from lenbench.export.tracker_runs import KEY_TAG, tracker_runs


def test_one_run_per_cell_and_variant_with_metrics_by_length():
    rows = tiny_rows()
    runs = tracker_runs(rows)
    learned = rows[~rows["encoding"].str.startswith("baseline:") & (rows["bucket"] == "")]
    assert len(runs) == len(learned.groupby(["cell_id", "variant"]))
    assert len({r.key for r in runs}) == len(runs)
    for run in runs:
        steps = [step for step, _ in run.steps]
        assert steps == sorted(steps)
        mine = learned[(learned["cell_id"] == run.params["cell_id"]) & (learned["variant"] == run.params["variant"])]
        for step, values in run.steps:
            at = mine[mine["eval_len"] == step].set_index("metric")["value"]
            assert {m: v for m, v in values.items() if m != "ratio"} == at.dropna().to_dict()
    failed = next(r for r in runs if r.failed)
    assert failed.failed == ["exact_match@32: position 31 out of range"] and "lenbench.failed" in failed.tags
    assert [r.key for r in tracker_runs(rows)] == [r.key for r in runs]  # the same source, the same keys


def test_mlflow_file_store_reads_back_and_a_replay_logs_nothing(tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="the tracking extra is not installed (pip install 'lenbench[tracking]')")
    from mlflow import MlflowClient

    from lenbench.export.mlflow_runs import log_runs

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    runs = tracker_runs(tiny_rows())
    assert log_runs(runs, uri, "tiny") == (len(runs), 0)
    assert log_runs(runs, uri, "tiny") == (0, len(runs))
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("tiny")
    logged = client.search_runs([experiment.experiment_id])
    assert len(logged) == len(runs)
    for run in runs:
        (found,) = [r for r in logged if r.data.tags[KEY_TAG] == run.key]
        assert found.data.params == run.params and found.info.run_name == run.name
        for metric in {m for _, values in run.steps for m in values}:
            history = client.get_metric_history(found.info.run_id, metric)
            assert sorted((h.step, h.value) for h in history) == \
                [(step, values[metric]) for step, values in run.steps if metric in values]


def wandb_records(path):
    """The records of a W&B transaction log: a 7-byte header, then 32 KiB blocks of chunks (crc32 u32,
    length u16, type u8: 1 full, 2 first, 3 middle, 4 last)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()[7:]
    records, pending, block = [], b"", 32768
    pos = 0
    while pos + 7 <= len(data):
        left = block - ((pos + 7) % block)  # blocks count from the start of the file, header included
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            break
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


@pytest.mark.slow
def test_wandb_offline_runs_hold_the_config_and_the_curves(tmp_path):
    wandb = pytest.importorskip("wandb", reason="the tracking extra is not installed (pip install 'lenbench[tracking]')")
    from lenbench.export.wandb_runs import log_runs

    runs = tracker_runs(tiny_rows())[:2]
    hooks = sys.exit, sys.excepthook
    assert log_runs(runs, "tiny", tmp_path, "offline") == 2
    assert (sys.exit, sys.excepthook) == hooks  # wandb's exit hooks do not outlive the replay (sys.exit() exits 0)
    wandb.teardown()  # W&B's service writes the last run's log after finish() returns; teardown waits for it
    for run in runs:
        (log,) = (tmp_path / "wandb").glob(f"offline-run-*-{run.key}/run-{run.key}.wandb")
        records = wandb_records(log)
        (start,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        assert start.run_id == run.key and start.display_name == run.name
        config = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in start.config.update}
        assert {k: config[k] for k in run.params} == run.params
        history = [(r.history.step.num, {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                             for i in r.history.item})
                   for r in records if r.WhichOneof("record_type") == "history"]
        assert [(step, {k: h[k] for k in values}) for (step, h), (_, values) in zip(history, run.steps, strict=True)] \
            == run.steps
