import tempfile
from miopen_solver.problem import ConvProblem
from miopen_solver.target import get_target
from miopen_solver import direct
from miopen_solver.config import KernelSchedule
from miopen_solver.kernels import offline
layers = [("convnext 7x7 c96 56", dict(N=64, C=96, Hi=56, Wi=56, K=96, G=96, Y=7, X=7, pH=3, pW=3)),
          ("effb0 5x5 c240 28", dict(N=64, C=240, Hi=28, Wi=28, K=240, G=240, Y=5, X=5, pH=2, pW=2)),
          ("effb0 5x5 s2 c144 56", dict(N=64, C=144, Hi=56, Wi=56, K=144, G=144, Y=5, X=5, pH=2, pW=2, sH=2, sW=2))]
print("| layer | layout | tile (m x n x k, warps) | sm_90 regs | sm_80 regs | LDS bytes | min blocks (sm_90) |")
print("|---|---|---|---|---|---|---|")
for name, kw in layers:
  for lay in ("NHWC", "NCHW"):
    p = ConvProblem(dtype="fp16", **kw, in_layout=lay, out_layout=lay, fil_layout=lay)
    for tile in direct.MMA_TILES:
        c = direct.mma_config(*tile)
        if lay == "NCHW": c = c.replace(schedule=KernelSchedule.DIRECT_NCHW)
        regs = []
        for arch in ("sm_90", "sm_80"):
            t = get_target(arch)
            ok, why = direct.is_valid_direct_config(p, t, c)
            if not ok: regs.append("refused (LDS)"); continue
            s = direct.make_direct_spec(p, t, c)
            b = offline.inspect_nvidia(s.emit().text, arch, tempfile.mkdtemp(), "k")
            assert b.spill_store_bytes == 0 and b.stack_bytes == 0
            regs.append(str(b.registers))
            if arch == "sm_90": lds, mb = s.lds_bytes, s.min_blocks
        print(f"| {name} | {lay} | {tile[0]}x{tile[1]}x{tile[2]}, {tile[3]} | {regs[0]} | {regs[1]} | {lds} | {mb} |")
