# Fourth stages from runs/all (nvidia-h100-x2; carry .whl, runs/corpus and runs/all), side by side in the background,
# one per GPU, each given as NAME:GPU:LR:MIX[:SEED] (seed 0 by default), 6.0 minutes each (with the 23.9 minutes of
# runs/all, 29.9 in all); then each is scored on the machine's CPU, on the visitor development set and with the
# README's evaluation command at once (8 workers each). The calls of 2026-11-26 (the third in a second session):
#   bash fourth.sh fourA:0:1e-3:math-acrostic-finetune-7 fourB:1:5e-4:math-acrostic-finetune-7
#   bash fourth.sh fourC:0:1e-3:english-finetune-7 fourD:1:1e-3:general-finetune-7
#   bash fourth.sh fourF:0:5e-4:english-math-finetune-7 fourG:1:7e-4:english-math-finetune-7
#   bash fourth.sh fourF1:0:5e-4:english-math-finetune-7:1 fourF2:1:5e-4:english-math-finetune-7:2   (fourF again)
# (the first call scored the two sets one after the other, 15 workers each). Wait with `wait.sh fourA fourB`.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
[ -f runs/all/model.safetensors ] || { echo "runs/all is missing: carry it"; exit 1; }
fourth() {  # $1 name, $2 GPU, $3 learning rate, $4 mix, $5 seed
    export CUDA_VISIBLE_DEVICES=$2
    python3 -m training.train --out runs/$1 --init-from runs/all --family-weights $4 \
        --minutes 6.0 --lr $3 --seed ${5:-0} --warmup-steps 50 --short-canvas 64 --batch-size 1024 --steps 100000 \
        --self-correction 1 --self-correction-max-entropy 0.1 --routing gather --workers 13 > runs/$1.log 2>&1 || {
        echo 1 > runs/$1.done; return; }
    export CUDA_VISIBLE_DEVICES=
    python3 -m training.evaluate --model runs/$1 --families --demo-seeds 0 --visitor-set dev \
        --paraphrases 60 --workers 8 --threads 1 --json runs/$1/dev_visitor.json > runs/$1/dev_visitor.txt 2>> runs/$1.log &
    python3 -m training.evaluate --model runs/$1 --families json math acrostic --per-family 50 \
        --paraphrases 60 --demo-seeds 1 --off-family --workers 8 --threads 1 --json runs/$1/eval.json \
        > runs/$1/eval.txt 2>> runs/$1.log
    status=$?
    wait $!
    echo $(( status | $? )) > runs/$1.done
}
export -f fourth
for run in "$@"; do
    IFS=: read -r name gpu lr mix seed <<< "$run"
    setsid nohup bash -c "fourth $name $gpu $lr $mix ${seed:-0}" < /dev/null > /dev/null 2>&1 &
done
