"""A run directory's TensorBoard event files, read by the tensorboard package,
against the run's metrics.jsonl (and results.jsonl of cloze-finetune).

  check_tfevents.py RUN_DIR [--files N] [--steps N] [--evals LIST] [--results]

Checked (one FAIL line each, exit 1):
  * every record of every events.out.tfevents.* file passes tensorboard's
    own record reader (its length and data CRCs: masked CRC-32C), and each
    file starts with file_version "brain.Event:2";
  * in name order over the files, each tag's steps strictly increase (no
    step twice across a --resume);
  * every scalar equals, as a float32, the matching value of metrics.jsonl's
    last attempt at that step (tag "group/key" = key; "eval/key" =
    "eval_key"; "memory/key" = a record without a step; "dev/score" and
    "dev/<name>" = results.jsonl's score and dev.<name>), null = NaN, and
    every number of metrics.jsonl's step and evaluation records has its
    scalar;
  * tensorboard's EventAccumulator (what `tensorboard --logdir` serves)
    holds exactly the same steps and values per tag;
  * --files: how many event files; --steps: train/loss's steps are 1..N;
    --evals: eval/samples's steps (comma list); --results: dev scalars exist.
"""

import argparse
import glob
import json
import math
import os
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL: " + msg)


def f32(v):
    return np.float32(float("nan") if v is None else v)


def same(a, b):
    a, b = f32(a), f32(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def read_file(path):
    """Every event of one file through tensorboard's record reader (CRC-checked)."""
    reader = PyRecordReader_New(path.encode())
    events = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            break
        except errors.DataLossError as e:
            fail(f"{path}: tensorboard's reader: {e}")
            break
        events.append(event_pb2.Event.FromString(reader.record()))
    return events


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--files", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--evals")
    ap.add_argument("--results", action="store_true")
    a = ap.parse_args()

    # metrics.jsonl: the last attempt's value of each key at each step
    want, memory = {}, {}
    for line in open(os.path.join(a.run_dir, "metrics.jsonl")):
        r = json.loads(line)
        if r.get("resumed"):
            continue
        if "step" not in r:
            memory.update(r)
            continue
        for k, v in r.items():
            if k != "step" and (v is None or isinstance(v, (int, float))):
                want[(k, r["step"])] = v
    dev = {}
    res_path = os.path.join(a.run_dir, "results.jsonl")
    if os.path.exists(res_path):
        for line in open(res_path):
            r = json.loads(line)
            if r.get("kind") == "eval":
                dev[("score", r["step"])] = r["score"]
                for k, v in r["dev"].items():
                    if k != "examples":
                        dev[(k, r["step"])] = v

    files = sorted(glob.glob(os.path.join(a.run_dir, "events.out.tfevents.*")))
    if a.files is not None and len(files) != a.files:
        fail(f"{len(files)} event files, expected {a.files}: {files}")
    raw = {}  # tag -> [(step, value)] in file order
    for path in files:
        events = read_file(path)
        if not events or events[0].file_version != "brain.Event:2":
            fail(f"{path}: first record is not file_version brain.Event:2")
        for e in events:
            for v in e.summary.value:
                raw.setdefault(v.tag, []).append((e.step, v.simple_value))

    seen = set()
    for tag, pts in raw.items():
        steps = [s for s, _ in pts]
        if any(b <= a_ for a_, b in zip(steps, steps[1:])):
            fail(f"{tag}: steps not strictly increasing: {steps}")
        group, name = tag.split("/", 1)
        for step, value in pts:
            if group == "memory":
                ref, key = memory.get(name, "absent"), name
            elif group == "dev":
                ref, key = dev.get((name, step), "absent"), (name, step)
            else:
                key = ("eval_" + name if group == "eval" else name, step)
                ref = want.get(key, "absent")
                seen.add(key)
            if ref == "absent":
                fail(f"{tag} at step {step}: no such value in metrics.jsonl/results.jsonl")
            elif not same(ref, value):
                fail(f"{tag} at step {step}: {value!r} in the events, {ref!r} in the run's file")
    missing = sorted(set(want) - seen)
    if missing:
        fail(f"{len(missing)} values of metrics.jsonl have no scalar, e.g. {missing[:5]}")

    # what TensorBoard serves: the accumulator over the directory
    acc = EventAccumulator(a.run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    if sorted(tags) != sorted(raw):
        fail(f"EventAccumulator's tags {sorted(tags)} differ from the files' {sorted(raw)}")
    for tag in tags:
        got = [(e.step, np.float32(e.value)) for e in acc.Scalars(tag)]
        exp = [(s, np.float32(v)) for s, v in raw.get(tag, [])]
        if len(got) != len(exp) or not all(
            s1 == s2 and same(v1, v2) for (s1, v1), (s2, v2) in zip(got, exp)
        ):
            fail(f"{tag}: EventAccumulator serves {got}, the files hold {exp}")

    if a.steps is not None:
        steps = [s for s, _ in raw.get("train/loss", [])]
        if steps != list(range(1, a.steps + 1)):
            fail(f"train/loss steps {steps}, expected 1..{a.steps}")
    if a.evals is not None:
        steps = [s for s, _ in raw.get("eval/samples", [])]
        if steps != [int(x) for x in a.evals.split(",")]:
            fail(f"eval/samples steps {steps}, expected {a.evals}")
    if a.results and not any(t.startswith("dev/") for t in raw):
        fail("no dev/ scalars although results.jsonl has evaluations")
    n = sum(len(p) for p in raw.values())
    if fails:
        sys.exit(1)
    print(f"ok: {len(files)} event file(s), {len(raw)} tags, {n} scalars equal to the run's files")


main()
