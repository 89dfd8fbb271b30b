# Device call 1: stage 1 of the README recipe (open-mix-4, 17.4 min) with the gathered routing, in the
# background (setsid) so that later calls on the same machine can wait on it.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
mkdir -p runs
setsid nohup bash -c 'python3 -m training.train --out runs/open --family-weights open-mix-4 --short-canvas 64 \
    --batch-size 1024 --minutes 17.4 --steps 100000 --warmup-steps 250 --self-correction 1 \
    --self-correction-max-entropy 0.1 --routing gather > runs/open.log 2>&1; echo $? > runs/open.done' \
    < /dev/null > /dev/null 2>&1 &
