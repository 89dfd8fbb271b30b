# Device call 1 (nvidia-h100-x2): two whole recipes side by side, one per GPU, in the background (setsid),
# so later calls can wait on them. Both are the README's three stages with the gathered routing, shortened
# to 13.0 + 5.6 + 3.7 = 22.3 minutes (about 27 minutes of the stock routing's steps, against the shipped
# 29.8) so that both fit one 30-minute device session:
#   runs/ctrl: open-mix-4 -> drill-finetune   -> math-finetune    (the shipped recipe)
#   runs/subj: open-mix-5 -> drill-finetune-5 -> math-finetune-5  (the same plus open subjects)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
mkdir -p runs
recipe() {  # $1 name, $2 GPU, $3 $4 $5 the three stages' mixes
    export CUDA_VISIBLE_DEVICES=$2
    common="--short-canvas 64 --batch-size 1024 --steps 100000 --self-correction 1 --self-correction-max-entropy 0.1 \
        --routing gather --workers 13"
    python3 -m training.train --out runs/$1-open --family-weights $3 --minutes 13.0 --warmup-steps 250 $common \
        > runs/$1-open.log 2>&1 &&
    python3 -m training.train --out runs/$1-drill --init-from runs/$1-open --family-weights $4 --minutes 5.6 \
        --lr 1e-3 --warmup-steps 50 $common > runs/$1-drill.log 2>&1 &&
    python3 -m training.train --out runs/$1 --init-from runs/$1-drill --family-weights $5 --minutes 3.7 \
        --lr 1e-3 --warmup-steps 50 $common > runs/$1.log 2>&1
    echo $? > runs/$1.done
}
export -f recipe
setsid nohup bash -c 'recipe ctrl 0 open-mix-4 drill-finetune math-finetune' < /dev/null > /dev/null 2>&1 &
setsid nohup bash -c 'recipe subj 1 open-mix-5 drill-finetune-5 math-finetune-5' < /dev/null > /dev/null 2>&1 &
