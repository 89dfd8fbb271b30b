"""`python -m benchmarks.bench_sharded`: its dry run under torchrun, and how its profile names kernels.

The benchmark's real runs happen on a 4-GPU machine lent for minutes, where a crash costs the whole
call; this dry run (gloo, 2 CPU processes, 2 layers and 8 experts) keeps its every path working.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_sharded import kernel_kind
from tests.torchrun import single_host

pytestmark = pytest.mark.processes


ROOT = Path(__file__).resolve().parent.parent

# Kernel names as torch.profiler reported them for the 26B shape on 2 H200s (truncated as the benchmark keeps them).
H200_KERNELS = {
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "all-reduce",
    "_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13GemmUniversalINS5_17GroupProblem":
        "experts (grouped GEMM)",
    # named after the ops inductor fused around an all-reduce and a grouped GEMM: neither is one
    "triton_per_fused__to_copy_all_reduce_div_floor_divide_ge_index_masked_fill_mul_ne_sum_unsqueeze_view_24":
        "inductor's fused kernels",
    "triton_poi_fused__grouped_mm__to_copy__unsafe_view_add_floor_divide_index_mean_mul_pow_transpose_view_19":
        "inductor's fused kernels",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x256_4x1x1_cga1x1x1_kernel0_0": "attention",
    "fmha_cutlassF_bf16_aligned_32x128_gmem_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t": "attention",
    "nvjet_sm90_tst_64x64_64x13_1x2_h_bz_TNT": "other GEMM",
    "void at::native::radixSortKVInPlace<-2, -1, 64, 32, long, long, unsigned int>": "other",
}


@pytest.mark.parametrize("name, kind", list(H200_KERNELS.items()))
def test_profile_names_each_kind_of_kernel(name, kind):
    assert kernel_kind(name) == kind


def test_dry_run_under_torchrun_reports_every_rank_and_the_profile(tmp_path):
    rows = tmp_path / "rows.jsonl"
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run(
        [*single_host(2),
         "-m", "benchmarks.bench_sharded", "--kind", "expert", "--device", "cpu", "--layers", "2",
         "--experts", "8", "--vocab", "4096", "--reps", "1", "--profile", "--json", str(rows)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]  # rank 0 alone writes

    assert row["kind"] == "expert" and row["processes"] == 2 and row["path"] == "eager"
    # the first run and one timed rep, each a stock/captured pair with one seed, on both ranks
    assert row["same_per_seed_per_rank"] == [[True, True], [True, True]]
    assert row["ranks_agree_per_run"] == [True] * 4
    assert row["identical"] is True
    assert row["compile_alike"] == "filtered reduction configs"  # as the product loads a sharded model
    weights = row["weights_gib_per_rank"]
    assert len(weights) == 2 and weights[0] == weights[1] > 0
    assert row["all_reduces_per_step"] > 0  # the eager all-reduce clock counted gloo's calls
    for by_kind in row["profile_by_kind_per_rank"]:
        assert by_kind["all-reduce"] > 0 and by_kind["attention"] > 0
    assert row["profile"]["wall_ms"] > 0 and len(row["profile"]["top"]) > 0
