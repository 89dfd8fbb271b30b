# Device calls 2..n: wait (at most ~9 minutes a call) for both recipes, print their progress; when both are
# done, put the two models and the logs under $OUT in 15 MB pieces.
for _ in $(seq 1 108); do
    [ -f runs/ctrl.done ] && [ -f runs/subj.done ] && break
    sleep 5
done
for f in runs/*.log; do echo "== $f"; tail -n 2 $f | cut -c1-300; done
if [ -f runs/ctrl.done ] && [ -f runs/subj.done ]; then
    cat runs/*.done
    tar cf - runs/ctrl runs/subj runs/*.log | split -b 15M - $OUT/models.tar.
fi
