import sys, random, tempfile, numpy as np
sys.path.insert(0, "tests")
import kernel_emu
from test_direct_mma import random_mma_problem, SMALL_TILES, LAYOUT_CASES, laid, native, SM90
from miopen_solver.direct import make_direct_spec, mma_config, mma_reason, MMA_TILES, is_valid_direct_config
from miopen_solver import layouts
from miopen_solver.reference import dgrad_reference, rms_range, default_tolerance
R = random.Random(int(sys.argv[1]))
n_ok = 0
for i in range(int(sys.argv[2])):
    p = None
    while p is None:
        p = random_mma_problem(R)
    nat = R.random() < 0.5
    if nat:
        p = laid(p, R.choice(LAYOUT_CASES))
    tiles = [t for t in SMALL_TILES + MMA_TILES if is_valid_direct_config(p, SM90, native(t) if nat else mma_config(*t))[0]]
    tile = R.choice(tiles)
    s = make_direct_spec(p, SM90, native(tile) if nat else mma_config(*tile))
    st = layouts.storage_dtype(p.dtype)
    rng = np.random.default_rng(i)
    dy = rng.standard_normal(layouts.dy_shape(p)).astype(np.float32).astype(st)
    w = rng.standard_normal(layouts.w_shape(p)).astype(np.float32).astype(st)
    out = kernel_emu.run_direct(s, dy, w, tempfile.mkdtemp(), vendor="nvidia").reshape(layouts.dx_shape(p))
    ok = np.isfinite(out.astype(np.float32)).all() and rms_range(dgrad_reference(p, dy, w), out) < default_tolerance(p.dtype, implicit_gemm=False)
    n_ok += ok
    if not ok: print("FAIL", p.short_tag(), p.in_layout, p.out_layout, tile, nat, flush=True)
print(f"{n_ok}/{sys.argv[2]} verified", flush=True)
