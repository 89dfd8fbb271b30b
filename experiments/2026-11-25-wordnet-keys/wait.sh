# Device calls 2..n: wait (at most ~9 minutes a call) for the named runs (default: half all), print their progress;
# when all are done, put the models and the logs under $OUT in 15 MB pieces.
names=${*:-half all}
done_all() { for n in $names; do [ -f runs/$n.done ] || return 1; done; }
for _ in $(seq 1 108); do
    done_all && break
    sleep 5
done
for f in runs/*.log; do echo "== $f"; tail -n 2 $f | cut -c1-300; done
if done_all; then
    for n in $names; do echo "$n: $(cat runs/$n.done)"; done
    tar cf - $(for n in $names; do echo runs/$n; done) runs/*.log | split -b 15M - $OUT/models.tar.
fi
