#!/usr/bin/env bash
# One-command accelerator check of lenbench (issue 12). No network; needs only what a CUDA machine
# with PyTorch, pandas, pytest-benchmark, seaborn, pyyaml and tqdm has. The project is used from
# this checkout through PYTHONPATH (nothing is installed).
#
#   bench/gpu_check.sh OUT_DIR [--device cuda|xpu|cpu]      (default cuda)
#
# Writes into OUT_DIR: gpu_check.log (everything printed), summary.json (each stage: command, exit
# code, seconds, timed out; rewritten after every stage), env.json (torch, device, runtimes, TF32
# state, C compiler), tests.xml (junit of the device tests), smoke.json (benchmark JSON of the smoke
# suite on the device), kernels_train.json (each encoding's training step against nope, training
# MFU per quick task), kernels.json (kernels at T = 1024 and 4096, fp32 and bf16, each fused kernel
# checked equal to its eager reference first), targets.txt (`python bench/kernel_plans.py` on both),
# train_step.json (bench/gpu_check.py: eager / fast / torch.compile / CUDA-graph training steps,
# losses compared with eager over 20 steps, MFU over the device's measured fp32 and bf16 matmul
# rates, and the batch-packing measurement; rewritten after every row).
#
# Each stage has a time limit so the whole check ends within 8 minutes on one GPU (the limits add up
# to 7); a stage that hits it is stopped with SIGINT, keeps what it measured, is recorded as timed
# out, and the check goes on. `--device cpu` runs the same stages with tiny settings (no
# compilation) in about a minute: tests/kernels/test_speed.py runs it.
set -u -o pipefail

if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: bench/gpu_check.sh OUT_DIR [--device cuda|xpu|cpu]" >&2
    exit 2
fi
OUT=$1
shift
DEVICE=cuda
while [ $# -gt 0 ]; do
    case $1 in
        --device) DEVICE=${2:?--device needs a value}; shift 2 ;;
        --device=*) DEVICE=${1#--device=}; shift ;;
        *) echo "gpu_check.sh: unknown argument $1 (usage: bench/gpu_check.sh OUT_DIR [--device cuda|xpu|cpu])" >&2; exit 2 ;;
    esac
done
case $DEVICE in cuda|xpu|cpu) ;; *) echo "gpu_check.sh: --device must be cuda, xpu or cpu, got $DEVICE" >&2; exit 2 ;; esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$OUT" || { echo "gpu_check.sh: cannot create $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-$(command -v python || command -v python3)}
[ -n "$PY" ] || { echo "gpu_check.sh: no python or python3 on PATH (set PYTHON=/path/to/python)" >&2; exit 2; }
# fp32 means fp32: images that force TF32 into cuBLAS through the environment would turn every fp32
# matmul (the MFU's peak and the steps) into TF32. Recorded in env.json, then unset for every stage.
TF32_OVERRIDES="TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=${TORCH_ALLOW_TF32_CUBLAS_OVERRIDE-} NVIDIA_TF32_OVERRIDE=${NVIDIA_TF32_OVERRIDE-}"
unset TORCH_ALLOW_TF32_CUBLAS_OVERRIDE NVIDIA_TF32_OVERRIDE
LOG="$OUT/gpu_check.log"
STAGES="$OUT/stages.tsv"
: > "$LOG"
: > "$STAGES"

if [ "$DEVICE" = cpu ]; then
    # tiny: a few device tests, two smoke cells, eager kernels at T = 64, two MFU tasks, no compile
    TESTS_K="fast_step_equals_eager and (nope or alibi)"
    SMOKE_K="copy-nope or copy-alibi"
    KERNEL_ENV=(LENBENCH_KERNEL_LENGTHS=64 LENBENCH_KERNEL_DTYPES=fp32 LENBENCH_KERNEL_SECONDS=0.01
                LENBENCH_KERNEL_ENCODINGS=rope,alibi LENBENCH_TRAIN_ROUNDS=2)
    TRAIN_K="training_mfu and lm"
    KERNEL_K="(rope-eager or alibi-eager or baseline) and not training"
    STEP_ARGS=(--tasks copy --encodings nope --variants eager,fast --steps 3 --rounds 2 --matmul-n 256 --packing 1,4)
    LIMITS=(60 120 120 120 240 120)
else
    TESTS_K="fast_step_equals_eager or fast_step_is_deterministic or token_loss"
    SMOKE_K=""
    KERNEL_ENV=(LENBENCH_KERNEL_LENGTHS=1024,4096 LENBENCH_KERNEL_DTYPES=fp32,bf16 LENBENCH_KERNEL_SECONDS=0.05
                LENBENCH_CONTENT_MAX_T=4096 LENBENCH_TRAIN_ROUNDS=20)
    TRAIN_K="training_step or training_mfu"
    KERNEL_K="not training_step and not training_mfu"
    STEP_ARGS=(--tasks lm,copy,passkey --encodings nope,rope --rounds 30)
    # env, tests, smoke, kernels_train, kernels, train_step: 7 minutes in all, a minute of margin
    # for the 8 (Python starts, the kill grace of a stage that overruns, targets.txt)
    LIMITS=(25 45 50 60 150 90)
fi

summarize() {  # summary.json from the stages so far; `summarize final` also prints it and sets the exit code
    "$PY" - "$STAGES" "$OUT/summary.json" "$DEVICE" "$@" <<'EOF'
import json, os, sys
stages = []
for line in open(sys.argv[1]):
    name, rc, ms, cmd = line.rstrip("\n").split("\t", 3)
    stages.append({"stage": name, "exit_code": int(rc), "seconds": int(ms) / 1000, "timed_out": int(rc) in (124, 130, 137),
                   "command": cmd})
ok = all(s["exit_code"] == 0 for s in stages)
seconds = sum(s["seconds"] for s in stages)
tmp = sys.argv[2] + ".tmp"
with open(tmp, "w") as fh:
    json.dump({"device": sys.argv[3], "ok": ok, "seconds": seconds, "finished": len(sys.argv) > 4, "stages": stages}, fh, indent=1)
os.replace(tmp, sys.argv[2])
if len(sys.argv) > 4:
    print(f"gpu_check: {'all stages passed' if ok else 'some stages failed'} in {seconds:.0f} s; summary in {sys.argv[2]}")
    sys.exit(0 if ok else 1)
EOF
}

stage() {  # stage NAME LIMIT_SECONDS COMMAND...: run with a time limit, log it, record it
    local name=$1 limit=$2
    shift 2
    echo "=== $name: $* (limit ${limit}s)" | tee -a "$LOG"
    local start end rc
    start=$(date +%s%N)
    timeout --signal=INT --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    end=$(date +%s%N)
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( (end - start) / 1000000 ))" "$*" >> "$STAGES"
    echo "=== $name: exit $rc" | tee -a "$LOG"
    summarize
}

stage env "${LIMITS[0]}" env LENBENCH_TF32_OVERRIDES="$TF32_OVERRIDES" "$PY" - "$DEVICE" "$OUT/env.json" <<'EOF'
import json, os, shutil, sys, torch
from lenbench.benchmark.machine import lenbench_machine_info
from lenbench.device import resolve_device
dev = resolve_device(sys.argv[1])
info = lenbench_machine_info(dev)
info.update(visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), gpu_count=torch.cuda.device_count() if dev.type == "cuda" else 0,
            tf32_overrides_unset=os.environ.get("LENBENCH_TF32_OVERRIDES"), float32_matmul_precision=torch.get_float32_matmul_precision(),
            c_compiler=os.environ.get("CC") or next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None))
if dev.type == "cuda":
    p = torch.cuda.get_device_properties(dev)
    info.update(gpu_memory_gib=round(p.total_memory / 2**30, 1), sm_count=p.multi_processor_count, capability=list(torch.cuda.get_device_capability(dev)),
                cuda_matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32, cudnn_allow_tf32=torch.backends.cudnn.allow_tf32)
json.dump(info, open(sys.argv[2], "w"), indent=1)
print(json.dumps(info))
EOF

# 1. the tests that have a device path (the fast training step == eager, on the device; cuBLAS pinned
#    to its deterministic workspace so that the determinism test tests lenbench)
stage tests "${LIMITS[1]}" env LENBENCH_TEST_DEVICE="$DEVICE" CUBLAS_WORKSPACE_CONFIG=:4096:8 "$PY" -m pytest tests/kernels/test_speed.py \
    -q -p no:cacheprovider -k "$TESTS_K" --junitxml="$OUT/tests.xml"

# 2. the smoke suite on the device (cells only; its kernels are in stage 3 at the target lengths)
stage smoke "${LIMITS[2]}" "$PY" -m pytest bench/test_extrapolation.py --suite smoke --device "$DEVICE" -q -p no:cacheprovider \
    --results-dir "$OUT/smoke" --benchmark-json "$OUT/smoke.json" ${SMOKE_K:+-k "$SMOKE_K"}

# 3. the training-step ratios and MFU first (a few compiles at most), then the kernels at T = 1024 and
#    4096, fp32 and bf16, each fused kernel checked equal to its eager reference before timing
stage kernels_train "${LIMITS[3]}" env "${KERNEL_ENV[@]}" "$PY" -m pytest bench/test_kernels.py --suite quick --device "$DEVICE" -q \
    -p no:cacheprovider --benchmark-json "$OUT/kernels_train.json" -k "$TRAIN_K"
stage kernels "${LIMITS[4]}" env "${KERNEL_ENV[@]}" "$PY" -m pytest bench/test_kernels.py --suite quick --device "$DEVICE" -q \
    -p no:cacheprovider --benchmark-json "$OUT/kernels.json" -k "$KERNEL_K"
JSONS=()
for f in "$OUT/kernels_train.json" "$OUT/kernels.json"; do [ -f "$f" ] && JSONS+=("$f"); done
if [ ${#JSONS[@]} -gt 0 ]; then
    timeout 60 "$PY" bench/kernel_plans.py "${JSONS[@]}" | tee "$OUT/targets.txt" | tee -a "$LOG"
fi

# 4. training-step variants: eager / fast for every task, packing, then torch.compile / CUDA graphs
stage train_step "${LIMITS[5]}" "$PY" bench/gpu_check.py --device "$DEVICE" --out "$OUT/train_step.json" "${STEP_ARGS[@]}"

summarize final
