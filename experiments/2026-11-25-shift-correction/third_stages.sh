# Device call: two third stages from the gathered retrain's stage-2 model (runs/drill, brought back by the
# 2026-11-25-gather-retrain session and carried in), each the README's third-stage command with
# --shift-correction 0.3, one after the other in the background (setsid) so later calls can wait on them.
#   runs/shiftA: math-finetune           (as finalA, plus the shifted canvases)
#   runs/shiftC: json-acrostic-finetune  (as finalC, plus the shifted canvases)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
third() {  # $1 out, $2 mix
    python3 -m training.train --out runs/$1 --init-from runs/drill --family-weights $2 --short-canvas 64 \
        --batch-size 1024 --minutes 5.0 --steps 100000 --lr 1e-3 --warmup-steps 50 --self-correction 1 \
        --self-correction-max-entropy 0.1 --routing gather --shift-correction 0.3 > runs/$1.log 2>&1
    echo $? > runs/$1.done
}
export -f third
setsid nohup bash -c 'third shiftA math-finetune; third shiftC json-acrostic-finetune' < /dev/null > /dev/null 2>&1 &
