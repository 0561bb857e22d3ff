"""Stress check of the direct schedule's mma body on the kernel emulator (no GPU): COUNT random
depthwise problems (tests/test_direct_mma.py's generator: strides 1-4, dilations 1-3, pads,
fp16/bf16), half NHWC on schedule 4 and half in a random own-layout case on schedule 14, each
on a random tile that fits, against the float64 reference with NaN-poisoned dX.

Usage (repo root): ``python bench/results/2026-12-03_s14/mma_stress.py SEED COUNT [nvidia|amd]``
"""

import random
import sys
import tempfile

import numpy as np

sys.path.insert(0, "tests")
import kernel_emu  # noqa: E402
from test_direct_mma import LAYOUT_CASES, SMALL_TILES, laid, random_mma_problem  # noqa: E402

from miopen_solver import layouts  # noqa: E402
from miopen_solver.config import KernelSchedule  # noqa: E402
from miopen_solver.direct import (AMD_MMA_TILES, MMA_TILES, is_valid_direct_config, make_direct_spec,  # noqa: E402
                                  mma_config, unit_rows)
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402


def main(seed: int, count: int, vendor: str) -> int:
    target = get_target("gfx942" if vendor == "amd" else "sm_90")
    rows = unit_rows(target)
    tiles = AMD_MMA_TILES if vendor == "amd" else SMALL_TILES + MMA_TILES
    R = random.Random(seed)
    ok_count = 0
    for i in range(count):
        p = None
        while p is None:
            p = random_mma_problem(R)
        native = R.random() < 0.5
        sched = KernelSchedule.DIRECT_NCHW if native else KernelSchedule.DIRECT
        if native:
            p = laid(p, R.choice(LAYOUT_CASES))
        cfgs = [mma_config(*t, rows=rows).replace(schedule=sched) for t in tiles]
        cfg = R.choice([c for c in cfgs if is_valid_direct_config(p, target, c)[0]])
        s = make_direct_spec(p, target, cfg)
        st = layouts.storage_dtype(p.dtype)
        rng = np.random.default_rng(i)
        dy = rng.standard_normal(layouts.dy_shape(p)).astype(np.float32).astype(st)
        w = rng.standard_normal(layouts.w_shape(p)).astype(np.float32).astype(st)
        out = kernel_emu.run_direct(s, dy, w, tempfile.mkdtemp(), vendor=vendor).reshape(layouts.dx_shape(p))
        ok = bool(np.isfinite(out.astype(np.float32)).all()
                  and rms_range(dgrad_reference(p, dy, w), out) < default_tolerance(p.dtype, implicit_gemm=False))
        ok_count += ok
        if not ok:
            print("FAIL", p.short_tag(), p.in_layout, p.out_layout, cfg.serialize(), flush=True)
    print(f"{ok_count}/{count} verified ({vendor})", flush=True)
    return 0 if ok_count == count else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "nvidia"))
