# The second device call of this experiment's session (nvidia-h100-x2; carry .whl, runs/corpus and runs/all): fourA met
# the template and visitor goals at seed 0 and left the off-family answers where they were (8 of 20), so two more
# fourth stages from runs/all weigh up what those prompts lean on: english-finetune-7 (fourC, GPU0) and
# general-finetune-7 (fourD, GPU1), training/data.py. Same settings as fourA (lr 1e-3, 6.0 minutes), then the
# README's evaluation and the visitor development set on the machine's CPU, side by side (8 workers each).
# Wait with `bash training/experiments/2026-11-25-wordnet-keys/wait.sh fourC fourD`.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
[ -f runs/all/model.safetensors ] || { echo "runs/all is missing: carry it"; exit 1; }
fourth() {  # $1 name, $2 GPU, $3 mix
    export CUDA_VISIBLE_DEVICES=$2
    python3 -m training.train --out runs/$1 --init-from runs/all --family-weights $3 \
        --minutes 6.0 --lr 1e-3 --warmup-steps 50 --short-canvas 64 --batch-size 1024 --steps 100000 \
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
setsid nohup bash -c 'fourth fourC 0 english-finetune-7' < /dev/null > /dev/null 2>&1 &
setsid nohup bash -c 'fourth fourD 1 general-finetune-7' < /dev/null > /dev/null 2>&1 &
