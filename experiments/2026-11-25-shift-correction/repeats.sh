# Device call: the run-to-run spread of a third stage. json-acrostic-finetune from runs/drill again, with
# --seed 1 (other batches and draws), without and with --shift-correction 0.3 (runs/finalC2, runs/shiftC2),
# one after the other in the background, to set beside finalC and shiftC (seed 0).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
third() {  # $1 out, $2 share
    python3 -m training.train --out runs/$1 --init-from runs/drill --family-weights json-acrostic-finetune \
        --short-canvas 64 --batch-size 1024 --minutes 5.0 --steps 100000 --lr 1e-3 --warmup-steps 50 \
        --self-correction 1 --self-correction-max-entropy 0.1 --routing gather --seed 1 --shift-correction $2 \
        > runs/$1.log 2>&1
    echo $? > runs/$1.done
}
export -f third
setsid nohup bash -c 'third finalC2 0; third shiftC2 0.3' < /dev/null > /dev/null 2>&1 &
