# Score model folders on the visitor development set (prompts/tasks/visitor_dev.py, 60 a family, seed 0,
# CPU float32) and nothing else: no template tasks, no demos.  Reports go to dev_visitor_<name>.txt here.
#   bash experiments/2026-11-25-shift-correction/visitor_dev.sh assets/models/diffusiongemma-tiny-demo runs/finalC
HERE=$(dirname "$0")
for model in "$@"; do
    name=$(basename "$model")
    python -m training.evaluate --model "$model" --families --demo-seeds 0 --visitor-set dev --paraphrases 60 \
        --workers 2 --threads 1 --json "/tmp/dev_visitor_$name.json" > "$HERE/dev_visitor_$name.txt"
    echo "$name: $(grep -E '^(json|math|acrostic) ' "$HERE/dev_visitor_$name.txt" | awk '{print $1, $6}' | tr '\n' ' ')"
done
