#!/bin/bash
# What made this folder's rows and figures.json, in one 590-second call on a 4 x H200 host:
# from the repository root, with Ray on the path (.whl/bootstrap.sh there); everything measured lands in $OUT as
# each part ends. The parts, in order: the host; NCCL's all-reduce bandwidth over NVLink and over loopback
# sockets; the two-node rehearsal (two Ray nodes of 2 GPUs each on this host, NCCL kept off NVLink and shared
# memory); then the DDP parity on one Ray node with the time left (studies/parity_ddp.py --budget-s).
set -u
OUT=${OUT:-/tmp/out}; RES=${RES:-/tmp/res}; mkdir -p "$OUT" "$RES"
RS=examples/realsize.py:workload
NET="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1"
T0=${T0:-$(date +%s)}  # the call's start (set before Ray's install), else this script's
elapsed() { echo $(($(date +%s) - T0)); }
say() { echo "== $(elapsed) s: $*"; }
export RAY_AUTH_MODE=token && ray get-auth-token --generate >/dev/null 2>&1
{ nvidia-smi -L; nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv; nvidia-smi topo -m
  grep -m1 'model name' /proc/cpuinfo; nproc; uname -r
  python3 -c 'import torch, ray; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "ray", ray.__version__)'
} > "$OUT/host.txt" 2>&1
say allreduce
timeout 50 python3 -m torch.distributed.run --standalone --nproc_per_node 4 studies/allreduce.py \
    --label nvlink --json "$OUT/allreduce.jsonl" 2>&1 | grep -v '^\*\|OMP_NUM'
env $NET timeout 70 python3 -m torch.distributed.run --standalone --nproc_per_node 4 studies/allreduce.py \
    --label sockets --json "$OUT/allreduce.jsonl" 2>&1 | grep -v '^\*\|OMP_NUM'
say two nodes
( export $NET
  CUDA_VISIBLE_DEVICES=0,1 ray start --head --port 6390 --num-gpus 2 --num-cpus 30 --include-dashboard false \
      --disable-usage-stats >/dev/null
  CUDA_VISIBLE_DEVICES=2,3 ray start --address 127.0.0.1:6390 --num-gpus 2 --num-cpus 30 --disable-usage-stats >/dev/null
  timeout 150 python3 studies/parity_ddp.py --address 127.0.0.1:6390 --workload $RS --point arch=resnet50 \
      --gpus 2,4 --repeats 1 --plain-repeats 1 --budget-s 140 --out "$RES" --name twonode --json "$OUT/twonode.jsonl"
  ray stop --force >/dev/null 2>&1 )
say parity
LEFT=$((575 - $(elapsed)))  # the call's 590 s, less the tar's
timeout $LEFT python3 studies/parity_ddp.py --workload $RS --point arch=resnet50 --point arch=bert_base \
    --point arch=gpt2_small,precision=bf16 --point arch=vit_b_16,precision=bf16 --gpus 1,2,4 --plain-repeats 1 \
    --budget-s $((LEFT - 20)) --out "$RES" --name h200x4 --json "$OUT/parity.jsonl"
say done
tar -C "$RES" --exclude=_tune -czf "$OUT/rows.tgz" .
