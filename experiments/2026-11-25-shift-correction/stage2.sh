# Device call: the README's second stage (drill-finetune, 7.5 min) from the gathered retrain's stage-1 model
# (runs/open, carried in), with --shift-correction 0.3, in the background; out: runs/drillS.
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
setsid nohup bash -c 'python3 -m training.train --out runs/drillS --init-from runs/open --family-weights drill-finetune \
    --short-canvas 64 --batch-size 1024 --minutes 7.5 --steps 100000 --lr 1e-3 --warmup-steps 50 --self-correction 1 \
    --self-correction-max-entropy 0.1 --routing gather --shift-correction 0.3 > runs/drillS.log 2>&1; echo $? > runs/drillS.done' \
    < /dev/null > /dev/null 2>&1 &
