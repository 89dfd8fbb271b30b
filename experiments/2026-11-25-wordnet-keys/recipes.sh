# Device call 1 (nvidia-h100-x2): two whole recipes side by side, one per GPU, in the background (setsid),
# so later calls can wait on them. Both are the README's three stages with the gathered routing, shortened
# to 14.0 + 6.0 + 3.8 = 23.8 minutes (about 97% of the shipped run's steps at the 590 ms a step of two runs at
# once, 2026-11-25) so that both fit one 30-minute device session:
#   runs/half: open-mix-6 -> drill-finetune-6 -> math-finetune-6 (half the visitor JSON keyed from WordNet)
#   runs/all:  open-mix-7 -> drill-finetune-7 -> math-finetune-7 (all of it)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
mkdir -p runs
recipe() {  # $1 name, $2 GPU, $3 $4 $5 the three stages' mixes
    export CUDA_VISIBLE_DEVICES=$2
    common="--short-canvas 64 --batch-size 1024 --steps 100000 --self-correction 1 --self-correction-max-entropy 0.1 \
        --routing gather --workers 13"
    python3 -m training.train --out runs/$1-open --family-weights $3 --minutes 14.0 --warmup-steps 250 $common \
        > runs/$1-open.log 2>&1 &&
    python3 -m training.train --out runs/$1-drill --init-from runs/$1-open --family-weights $4 --minutes 6.0 \
        --lr 1e-3 --warmup-steps 50 $common > runs/$1-drill.log 2>&1 &&
    python3 -m training.train --out runs/$1 --init-from runs/$1-drill --family-weights $5 --minutes 3.8 \
        --lr 1e-3 --warmup-steps 50 $common > runs/$1.log 2>&1
    echo $? > runs/$1.done
}
export -f recipe
setsid nohup bash -c 'recipe half 0 open-mix-6 drill-finetune-6 math-finetune-6' < /dev/null > /dev/null 2>&1 &
setsid nohup bash -c 'recipe all 1 open-mix-7 drill-finetune-7 math-finetune-7' < /dev/null > /dev/null 2>&1 &
