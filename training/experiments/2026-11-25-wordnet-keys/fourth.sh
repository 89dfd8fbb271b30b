# For the next device session (nvidia-h100-x2; carry .whl, runs/corpus and runs/all): a fourth stage after runs/all,
# which met both JSON goals and fell under the arithmetic and acrostic ones (README.md here). Two runs side by
# side, one per GPU, at two learning rates, 6.0 minutes each: with the 23.9 minutes of runs/all, 29.9 in all.
# Then both are scored on the machine's CPU, in the background too (15 workers each): on the visitor development
# set, which chooses between them, then with the README's evaluation command, which says whether the chosen one
# meets the goals (the other's report is kept, not used to choose).
# Wait with `bash training/experiments/2026-11-25-wordnet-keys/wait.sh fourA fourB`.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
[ -f runs/all/model.safetensors ] || { echo "runs/all is missing: carry it"; exit 1; }
fourth() {  # $1 name, $2 GPU, $3 learning rate
    export CUDA_VISIBLE_DEVICES=$2
    python3 -m training.train --out runs/$1 --init-from runs/all --family-weights math-acrostic-finetune-7 \
        --minutes 6.0 --lr $3 --warmup-steps 50 --short-canvas 64 --batch-size 1024 --steps 100000 \
        --self-correction 1 --self-correction-max-entropy 0.1 --routing gather --workers 13 > runs/$1.log 2>&1 &&
    CUDA_VISIBLE_DEVICES= python3 -m training.evaluate --model runs/$1 --families --demo-seeds 0 --visitor-set dev \
        --paraphrases 60 --workers 15 --threads 1 --json runs/$1/dev_visitor.json > runs/$1/dev_visitor.txt 2>> runs/$1.log &&
    CUDA_VISIBLE_DEVICES= python3 -m training.evaluate --model runs/$1 --families json math acrostic --per-family 50 \
        --paraphrases 60 --demo-seeds 1 --off-family --workers 15 --threads 1 --json runs/$1/eval.json \
        > runs/$1/eval.txt 2>> runs/$1.log
    echo $? > runs/$1.done
}
export -f fourth
setsid nohup bash -c 'fourth fourA 0 1e-3' < /dev/null > /dev/null 2>&1 &
setsid nohup bash -c 'fourth fourB 1 5e-4' < /dev/null > /dev/null 2>&1 &
