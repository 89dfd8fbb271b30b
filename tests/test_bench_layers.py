"""benchmarks/bench_layers.py runs end to end on the CPU (--dry-run: the tiny test model, 4 steps), so the
GPU run is not its first; every variant (layers, shift) must give the stock sequence, and the pinned one its pins."""

from __future__ import annotations

from benchmarks import bench_layers


def test_bench_layers_dry_run(capsys):

    assert bench_layers.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "all captured runs bit-identical to stock: True" in out
    # the pinned variant is the intervention: checked for its pins and its replay instead of stock's sequence
    assert "captured+pins pins held at every step and committed: True, replays from its seed: True, differs from stock: True" in out
    assert out.rstrip().endswith("held, committed and replayed on every path: True")
    table = out.split("| path | variant | ms/step")[1].split("\n\n")[0]  # the steady-step table
    rows = [line for line in table.splitlines() if line.startswith("| eager |")]
    assert [row.split("|")[2].strip() for row in rows] == list(bench_layers.VARIANTS)
    sizes = {row.split("|")[2].strip(): int(row.split("|")[-2].strip().replace(",", "")) for row in rows[1:]}
    # the shift adds one float32 a position, layers two values a layer and position and their ranks: all show
    assert sizes["captured+both"] > sizes["captured+layers"] > sizes["captured"]
    assert sizes["captured+shift"] > sizes["captured"]
    # the fast lens is checked against its reference, and compiling is reported apart from the steady step
    assert "the fast lens equal to its reference: True" in out
    firsts = out.split("| first run s |")[1].split("\n\n")[0]
    assert [row.split("|")[2].strip() for row in firsts.splitlines() if row.startswith("| eager |")] == list(bench_layers.VARIANTS)


def test_paired_ratio_cancels_the_hosts_drift():
    # stock's time drifts by 60% over the repetitions and the variant rides the same drift 5% slower: the
    # medians of the two variants apart would move with which repetitions they got, the paired ratio does not
    drift = [1.0, 1.6, 1.2, 0.9, 1.4, 1.1, 1.3, 1.0]
    stock = [dict(seconds=d) for d in drift]
    variant = [dict(seconds=1.05 * d * (1 + 0.01 * (-1) ** i)) for i, d in enumerate(drift)]
    median, low, high = bench_layers.paired_ratios(variant, stock)
    assert abs(median - 1.05) < 1e-9
    assert 1.03 < low <= median <= high < 1.07
    # one repetition (the dry run) has no interval to bootstrap: the ratio itself, three times
    assert bench_layers.paired_ratios(variant[:1], stock[:1]) == (1.05 * 1.01,) * 3
