"""NumPy emulation of the fused kernels' index math, block by block and lane by lane.

Why: a wrong fragment index or box offset on the GPU shows up only as a wrong number, and GPU
time is scarce. This emulator executes the plans of :mod:`composer.fused.builder` with the same
formulas as the template (``Dir<DIR>::at``, ``tile_off``, ``face_off``, ``Contract::point`` and the
MMA fragment layouts), emulating one ``mma.sync`` by rebuilding A and B from the 32 lanes'
fragments, so that a CPU test can compare it with :func:`composer.dg.reference_tendency`.
It is slow by design (Python loops over blocks and warps): use it at small orders and grids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from composer import dg
from composer.fused.builder import KernelPlan, StreamPlan, d_panel_layout, kernel_plans
from composer.fused.config import FusedConfig
from composer.fused.copies import program
from composer.fused.links import face_links, linked_nodes
from composer.fused.order import element_sequence
from composer.arch.mma import mma_shape


def box_point(d: int, a: np.ndarray | int, l: np.ndarray | int, plan: KernelPlan) -> tuple:
    """Box-local (k, j, i) of position a on line l of direction d (Dir<d>::at)."""
    _, bj, bi = plan.kernel.box
    if d == 0:
        return l // bj, l % bj, a
    if d == 1:
        return l // bi, a, l % bi
    return a, l // bi, l % bi


def _box_origin(box: int, extents: tuple[int, int, int], nq: int, axis: int | None = None,
                half: int | None = None) -> tuple[int, int, int]:
    """(k0, j0, i0) of box number ``box`` of an element, with the templates' formulas: i chunks
    fastest, k slowest; with ``axis`` (block_order = "axis", fused_stream.cu.j2) that direction's
    chunks fastest, the other two in k-slowest order. ``half``: the direction whose first half alone the
    boxes tile (a streamed parity kernel's carried axis: CK, CJ, CI of the template)."""
    bk, bj, bi = extents
    ck, cj, ci = (nq // 2 if half == d else nq for d in (2, 1, 0))
    nbk, nbj, nbi = ck // bk, cj // bj, ci // bi
    if axis is None or axis == 0:
        return box // (nbj * nbi) * bk, box // nbi % nbj * bj, box % nbi * bi
    if axis == 1:
        return box // (nbi * nbj) * bk, box % nbj * bj, box // nbj % nbi * bi
    return box % nbk * bk, box // (nbk * nbi) * bj, box // nbk % nbi * bi


def tile_offset(plan: KernelPlan, k, j, i):
    """tile_off of the template: padded strides, or unpadded rows with i XOR-swizzled (plan.swizzle)."""
    if plan.swizzle:
        return k * plan.ps + j * plan.rs + (i ^ (((j + k) & 3) << 2))
    return k * plan.ps + j * plan.rs + i


def _contract_simt(plan: KernelPlan, d: int, tile: np.ndarray, dmat: np.ndarray, nq: int):
    """(points, values) of every thread's outputs, as Contract<d> (CUDA-core engine) computes them."""
    tl, ta = plan.kernel.tile
    nl = plan.lines(d)
    gl, ga = nl // tl, nq // ta
    threads = plan.element_threads
    iters = gl * ga // threads
    pts, vals = [], []
    tid = np.arange(threads)
    for it in range(iters):
        wk = tid + it * threads
        for o in range(tl * ta):
            a = wk // gl * ta + o % ta
            l = wk % gl + o // ta * gl
            acc = np.zeros(threads)
            for m in range(nq):
                acc = acc + dmat[a, m] * tile[tile_offset(plan, *box_point(d, m, l, plan))]
            pts.append(box_point(d, a, l, plan))
            vals.append(acc)
    return pts, vals


def d_off(dp: int, a, m):
    """Shared-memory offset of D[a, panel column m] in a staged panel of dp columns (the template's d_off)."""
    swz = 4 * (a & 3) if dp % 16 == 0 else 4 * ((a >> 1) & 1)
    return a * dp + (m ^ swz)


def stage_panels(plan: KernelPlan, dmat: np.ndarray, nq: int) -> list[np.ndarray]:
    """The staged D panels as the cooperative copy (stage_d) writes them: thread tid, trip r copies
    the 16-byte pair n = tid + r*THREADS of row n // (DP/2) (D's rows, or with parity the parity rows
    ``dmat`` then holds). Unwritten slots stay NaN."""
    dp, pairs, rows = plan.d_panel, plan.d_panel // 2, plan.d_rows
    n = np.arange(rows * pairs)
    a, m = n // pairs, 2 * (n % pairs)
    panels = []
    for p in range(nq // dp):
        buf = np.full(rows * dp, np.nan)
        for h in range(2):
            off = d_off(dp, a, m) + h
            assert len(np.unique(off)) == len(off)
            buf[off] = dmat[a, p * dp + m + h]
        panels.append(buf)
    return panels


def _c_fragment(r: int, g, t):
    """(row, column) of accumulator register r of lane (g, t): c_r = C[g + 8*(r/2), 2t + r%2]."""
    return g + 8 * (r // 2), 2 * t + r % 2


def _mma(acc: np.ndarray, amat: np.ndarray, bmat: np.ndarray, g, t) -> None:
    """One mma.sync, emulated: C = A B from the matrices the lanes' fragments rebuilt, added to each
    lane's accumulator registers acc[r] (arrays over the 32 lanes)."""
    cmat = amat @ bmat
    for r in range(acc.shape[0]):
        acc[r] += cmat[_c_fragment(r, g, t)]


def _contract_mma(plan: KernelPlan, d: int, tile: np.ndarray, dmat: np.ndarray, nq: int, shape: str,
                  peers: list[np.ndarray] | None = None, aorg: int = 0):
    """(points, values) of every lane's C fragment, emulating mma.sync from the lanes' fragments.

    With D staged (plan.d_panel), the B fragments are read from the emulated shared-memory panels
    through d_off, as the template's Contract::step reads them. ``peers`` (the direction a cluster
    splits, Contract::run_cluster): the flux tiles of the cluster's ranks, rank h holding the axis's
    k-values [h * ext, (h + 1) * ext); the block's positions are its chunk's, from ``aorg``, and the
    staged D is addressed from row aorg (``aorg * DP + d_off(a, m)``)."""
    if plan.parity:
        assert peers is None, "parity kernels are not clustered (config.parity_problem)"
        return _contract_parity(plan, d, tile, dmat, nq, shape)
    panels = stage_panels(plan, dmat, nq) if plan.d_panel else None
    mm, mk = mma_shape(shape).m, mma_shape(shape).k
    mi = mm // 8
    wm_n, wn_n = plan.kernel.tile
    warps = plan.element_threads // 32
    ext = plan.positions(d)
    assert peers is not None or (ext == nq and aorg == 0), "a split direction reads its peers' tiles"
    tiles_l, tiles_a = plan.lines(d) // (mm * wm_n), ext // (8 * wn_n)
    # the template's static_assert: warp tiles divide the direction's lines x positions over the warps
    assert plan.lines(d) % (mm * wm_n) == 0 and ext % (8 * wn_n) == 0 and tiles_l * tiles_a % warps == 0, \
        f"{plan.name}: {wm_n}x{wn_n} warp tiles of {shape} do not divide {plan.lines(d)} lines x {ext} positions"

    def k_steps():
        """(A's tile, the k-step's column in it, D's column) in the order the template's loops
        visit them: Contract::run / run_staged over the whole axis, or Contract::run_cluster (all of
        D staged: rank by rank; D panels: panel p from rank h = p * DP / EXT at chunk column mb)."""
        if peers is None:
            for m0 in range(0, nq, mk):
                yield tile, m0, m0
        elif plan.d_panel == nq:
            for h in range(len(peers)):
                for m0 in range(0, ext, mk):
                    yield peers[h], m0, h * ext + m0
        else:
            dp = plan.d_panel
            for p in range(nq // dp):
                h = p * dp // ext
                mb = p * dp - h * ext
                for ml in range(0, dp, mk):
                    yield peers[h], mb + ml, p * dp + ml

    iters = tiles_l * tiles_a // warps
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    c_regs = mm // 4
    pts, vals = [], []
    for it in range(iters):
        for warp in range(warps):
            tid = warp + it * warps
            l0, a0 = tid % tiles_l * (mm * wm_n), tid // tiles_l * (8 * wn_n)
            acc = np.zeros((wm_n, wn_n, c_regs, 32))
            for src, m0, col in k_steps():
                for wm in range(wm_n):
                    amat = np.full((mm, mk), np.nan)
                    for i in range(mm * mk // 32):
                        m = m0 + t + 4 * (i // mi)
                        l = l0 + wm * mm + g + 8 * (i % mi)
                        amat[g + 8 * (i % mi), t + 4 * (i // mi)] = src[tile_offset(plan, *box_point(d, m, l, plan))]
                    for wn in range(wn_n):
                        bmat = np.full((mk, 8), np.nan)
                        for i in range(mk // 4):
                            if panels is None:
                                bmat[t + 4 * i, g] = dmat[a0 + wn * 8 + g, col + t + 4 * i]
                            else:
                                # the staged D from row aorg: the template moves the panel pointer by aorg * DP
                                dp = plan.d_panel
                                bmat[t + 4 * i, g] = panels[col // dp][aorg * dp + d_off(dp, a0 + wn * 8 + g,
                                                                                          col % dp + t + 4 * i)]
                        _mma(acc[wm, wn], amat, bmat, g, t)
            for wm in range(wm_n):
                for wn in range(wn_n):
                    for r in range(c_regs):
                        dl, da = _c_fragment(r, g, t)
                        a = a0 + wn * 8 + da
                        l = l0 + wm * mm + dl
                        pts.append(box_point(d, a, l, plan))
                        vals.append(acc[wm, wn, r])
    return pts, vals


def _contract_parity(plan: KernelPlan, d: int, tile: np.ndarray, rows: np.ndarray, nq: int, shape: str):
    """(points, values) of every lane's outputs in a ``parity`` kernel (Contract::parity_step and
    parity_out): per k-step m0 < h, the A fragments of the even and odd parts formed from the tile's
    values at m and p - m, the B fragments of A and B from the parity ``rows`` (staged through d_off
    when D is staged), two mma.sync per fragment pair; then a + b at each position a < h and b - a at
    p - a, the mirrored slots taking register r ^ 1 as the template's point() places them."""
    panels = stage_panels(plan, rows, nq) if plan.d_panel else None
    mm, mk = mma_shape(shape).m, mma_shape(shape).k
    mi, c_regs, half = mm // 8, mm // 4, nq // 2
    wm_n, wn_n = plan.kernel.tile
    warps = plan.element_threads // 32
    tiles_l, tiles_a = plan.lines(d) // (mm * wm_n), half // (8 * wn_n)
    assert plan.lines(d) % (mm * wm_n) == 0 and half % (8 * wn_n) == 0 and tiles_l * tiles_a % warps == 0, \
        f"{plan.name}: {wm_n}x{wn_n} warp tiles of {shape} do not divide {plan.lines(d)} lines x {half} positions"
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    pts, vals = [], []

    def b_value(a, m):
        if panels is None:
            return rows[a, m]
        return panels[0][d_off(plan.d_panel, a, m)]

    for it in range(tiles_l * tiles_a // warps):
        for warp in range(warps):
            tid = warp + it * warps
            l0, a0 = tid % tiles_l * (mm * wm_n), tid // tiles_l * (8 * wn_n)
            acc = np.zeros((2, wm_n, wn_n, c_regs, 32))
            for m0 in range(0, half, mk):
                for wm in range(wm_n):
                    even, odd = np.full((mm, mk), np.nan), np.full((mm, mk), np.nan)
                    for i in range(mm * mk // 32):
                        m = m0 + t + 4 * (i // mi)
                        l = l0 + wm * mm + g + 8 * (i % mi)
                        lo = tile[tile_offset(plan, *box_point(d, m, l, plan))]
                        hi = tile[tile_offset(plan, *box_point(d, nq - 1 - m, l, plan))]
                        even[g + 8 * (i % mi), t + 4 * (i // mi)] = lo + hi
                        odd[g + 8 * (i % mi), t + 4 * (i // mi)] = lo - hi
                    for wn in range(wn_n):
                        bmat = np.full((2, mk, 8), np.nan)
                        for i in range(mk // 4):
                            a, m = a0 + wn * 8 + g, m0 + t + 4 * i
                            bmat[0, t + 4 * i, g] = b_value(a, m)
                            bmat[1, t + 4 * i, g] = b_value(a, half + m)
                        _mma(acc[0, wm, wn], even, bmat[0], g, t)
                        _mma(acc[1, wm, wn], odd, bmat[1], g, t)
            for wm in range(wm_n):
                for wn in range(wn_n):
                    for r in range(c_regs):
                        dl, da = _c_fragment(r, g, t)
                        a, l = a0 + wn * 8 + da, l0 + wm * mm + dl
                        pts.append(box_point(d, a, l, plan))
                        vals.append(acc[0, wm, wn, r] + acc[1, wm, wn, r])
                        mirror = acc[1, wm, wn, r ^ 1] - acc[0, wm, wn, r ^ 1]
                        pts.append(box_point(d, nq - 1 - (a0 + wn * 8 + 2 * t + 1 - r % 2), l, plan))
                        vals.append(mirror)
    return pts, vals


def _stream_node(plan: StreamPlan, m, l, k0: int, j0: int, i0: int):
    """In-element offset of position m on line l (the streamed template's node())."""
    nq, (_, bj, bi) = plan.nq, plan.kernel.box
    l2 = bj if plan.dir == 0 else bi
    if plan.dir == 0:
        return ((k0 + l // l2) * nq + j0 + l % l2) * nq + m
    if plan.dir == 1:
        return ((k0 + l // l2) * nq + m) * nq + i0 + l % l2
    return (m * nq + j0 + l // l2) * nq + i0 + l % l2


def _stream_face_off(plan: StreamPlan, l, k0: int, j0: int, i0: int):
    nq, (_, bj, bi) = plan.nq, plan.kernel.box
    l2 = bj if plan.dir == 0 else bi
    return ((k0 if plan.dir < 2 else j0) + l // l2) * nq + (j0 if plan.dir == 0 else i0) + l % l2


def stage_stream_panel(plan: StreamPlan, qe: np.ndarray, ve: np.ndarray, dmat: np.ndarray, p: int,
                       a_org: int, k0: int, j0: int, i0: int) -> np.ndarray:
    """One pipeline stage as stage_panel() fills it (q panel, vel panel, D panel; NaN where no
    copy lands), with every 16-byte pair checked to land on its own slots. With parity the e and o
    panels (load_f's pairs and their mirrors, f_mirror; store_f's parity_parts) and D's virtual rows
    from the parity rows ``dmat``."""
    kp, nl, na, fs, ds, fp = (plan.k_panel, plan.lines(plan.dir), plan.positions(plan.dir), plan.fs, plan.ds,
                              plan.f_panel)
    nf, nv = plan.f_panels, plan.virtual_positions  # a_operand = "product": one panel of q*vel
    buf = np.full(nf * fp + nv * ds, np.nan)
    if plan.pointers:  # copies = "pointers": the copy program the template is generated from
        f_prog, d_prog, *mirror_prog = pointer_copies(plan, p, a_org, k0, j0, i0)
        g, f_off = f_prog
        if plan.parity:  # the mirrored pairs' program, in the same order (the same shared offsets)
            gm, m_off = mirror_prog[0]
            assert np.array_equal(m_off, f_off)
    else:
        n = np.arange(nl * kp // 2)
        m = 2 * (n % (kp // 2)) if plan.dir == 0 else n // (nl // 2)
        l = n // (kp // 2) if plan.dir == 0 else 2 * (n % (nl // 2))
        f_off = m * fs + l if plan.f_lines else l * fs + m
        g = _stream_node(plan, p * kp + m, l, k0, j0, i0)
        if plan.parity:  # the mirrored pair: the template's f_mirror (x: m + 1 mirrors to the pair's lower address)
            gm = _stream_node(plan, plan.nq - 1 - (p * kp + m + (plan.dir == 0)), l, k0, j0, i0)
    step = fs if plan.dir == 0 and plan.f_lines else 1  # x with parity: the pair's values are rows apart
    for h in range(2):  # the pair's second value: the next m (x) or the next line (y, z), +1 in both memories
        off = f_off + h * step
        assert len(np.unique(off)) == len(off) and off.max() < fp
        if plan.parity:  # parity_parts: x reads its mirror pair swapped
            mirror = gm + (1 - h if plan.dir == 0 else h)
            f, fm = qe[g + h] * ve[g + h], qe[mirror] * ve[mirror]
            buf[off], buf[fp + off] = f + fm, f - fm
        elif plan.product:
            buf[off] = qe[g + h] * ve[g + h]
        else:
            buf[off] = qe[g + h]
            buf[fp + off] = ve[g + h]
    n = np.arange(nv * kp // 2)
    a, m = n // (kp // 2), 2 * (n % (kp // 2))
    # D's rows, or its k-panel copy read with the kernel's own index formula; with parity virtual row a
    # is A's row a_org + a (a < NA), else B's row a_org + a - NA, of the parity rows (h rows of [A | B])
    rows = dmat.shape[0]
    if plan.parity:
        row, part = a_org + a % na, a // na
        d_flat, d_index = ((d_panel_layout(dmat, kp).reshape(-1), ((p + part * plan.panels) * rows + row) * kp + m)
                           if plan.d_panels else (dmat.reshape(-1), row * plan.nq + part * rows + p * kp + m))
    else:
        d_flat, d_index = ((d_panel_layout(dmat, kp).reshape(-1), (p * rows + a_org + a) * kp + m) if plan.d_panels
                           else (dmat.reshape(-1), (a_org + a) * plan.nq + p * kp + m))
    d_slot = a * ds + m
    if plan.pointers:
        d_index, d_slot = d_prog
    assert len(np.unique(d_slot)) == len(d_slot) and d_slot.max() < nv * ds
    for h in range(2):
        buf[nf * fp + d_slot + h] = d_flat[d_index + h]
    return buf


def pointer_copies(plan: StreamPlan, p: int, a_org: int, k0: int, j0: int, i0: int):
    """Every (global, shared) offset pair that the pointer program (copies = "pointers",
    :func:`composer.fused.copies.program`) copies at panel p, over all threads and trips: ((F's
    in-element node offsets, F panel offsets), (D's flat offsets, D panel offsets)), and with parity
    (the mirrored F pairs' node offsets, their F panel offsets)."""
    tid = np.arange(plan.kernel.threads)
    out = []
    for rows in program(plan, tid, p, a_org, k0, j0, i0):
        g = np.concatenate([g[mask] for g, _, mask in rows])
        s = np.concatenate([s[mask] for _, s, mask in rows])
        out.append((g, s))
    return out


def _paired_line(plan: StreamPlan, rho: int, g):
    """aline(): line of a lane's A row rho (= wm * MI + h) in a paired build; y and z pair rows."""
    return 16 * (rho // 2) + 2 * g + rho % 2 if plan.f_lines else 8 * rho + g


def _paired_fragments(plan: StreamPlan, buf: np.ndarray, a_value, mo: int, l0: int, a0: int, g, t, mi: int):
    """The 16-byte fragment loads of one k-octet at column mo (fragments = "paired"), as the
    template issues them: a_val[rho, j], b_val[wn, j] hold each lane's value at logical k index
    t + 4j; a load's second value is the next column (x, D) or the next line (y, z F panels)."""
    wm_n, wn_n = plan.kernel.tile
    fs, ds, nf, fp = plan.fs, plan.ds, plan.f_panels, plan.f_panel
    a_val = np.full((wm_n * mi, 2, 32), np.nan)
    b_val = np.full((wn_n, 2, 32), np.nan)
    pair_lines = plan.f_lines
    for rho in range(0, wm_n * mi, 2 if pair_lines else 1):
        for j in range(2 if pair_lines else 1):
            m, line = mo + 2 * t + j, l0 + _paired_line(plan, rho, g)
            s = m * fs + line if plan.f_lines else line * fs + m
            assert np.all(s % 2 == 0), "a 16-byte load must be 16-byte aligned"
            if pair_lines:
                a_val[rho, j], a_val[rho + 1, j] = a_value(s), a_value(s + 1)
            else:
                a_val[rho, 0], a_val[rho, 1] = a_value(s), a_value(s + 1)
    for wn in range(wn_n):
        s = nf * fp + (a0 + wn * 8 + g) * ds + mo + 2 * t
        assert np.all(s % 2 == 0), "a 16-byte load must be 16-byte aligned"
        b_val[wn, 0], b_val[wn, 1] = buf[s], buf[s + 1]
    return a_val, b_val


def _emulate_stream(config: FusedConfig, plan: StreamPlan, flat: Mapping[str, np.ndarray], fstar: np.ndarray,
                    dmat: np.ndarray, dqdt: np.ndarray, ne: int) -> None:
    """One streamed kernel, block by block and warp by warp, into dqdt (in place). With parity the
    warp tiles run over the virtual positions (u on the e panel at a0 < NA, w on the o panel after), and
    the epilogue pairs each u tile with the w tile of the same thread (iteration it + ITER / 2)."""
    nq, d = plan.nq, plan.dir
    nf = plan.f_panels
    mm, mk = config.mma_shape.m, config.mma_shape.k
    mi, c_regs = mm // 8, mm // 4
    wm_n, wn_n = plan.kernel.tile
    nl, na, kp, fs, ds, fp = plan.lines(d), plan.positions(d), plan.k_panel, plan.fs, plan.ds, plan.f_panel
    tiles_l, tiles_a = nl // (mm * wm_n), plan.virtual_positions // (8 * wn_n)
    warps = plan.kernel.threads // 32
    iters = tiles_l * tiles_a // warps
    assert iters * warps == tiles_l * tiles_a and (not plan.parity or iters % 2 == 0)
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    vel, metric = (flat["u"], flat["v"], flat["w"])[d], (flat["Ex"], flat["Ey"], flat["Ez"])[d]

    def f_off(m, l):
        return m * fs + l if plan.f_lines else l * fs + m

    def origin(tile: int) -> tuple[int, int]:
        return tile % tiles_l * (mm * wm_n), tile // tiles_l * (8 * wn_n)

    for e in range(ne):
        qe, ve, me = (x[e * nq**3:(e + 1) * nq**3] for x in (flat["q"], vel, metric))
        for box in range(plan.blocks_per_element):
            k0, j0, i0 = _box_origin(box, plan.kernel.box, nq, d if plan.axis_order else None,
                                     d if plan.parity else None)
            a_org = (i0, j0, k0)[d]
            bufs = [stage_stream_panel(plan, qe, ve, dmat, p, a_org, k0, j0, i0) for p in range(plan.panels)]
            accs = {}
            for tile in range(tiles_l * tiles_a):
                l0, a0 = origin(tile)
                f_base = fp if plan.parity and a0 >= na else 0  # parity: w contracts the o panel
                acc = np.zeros((wm_n, wn_n, c_regs, 32))
                for buf in bufs:
                    def a_value(s):
                        return buf[f_base + s] if plan.product else buf[s] * buf[fp + s]

                    for ml in range(0, kp, 8 if plan.paired else mk):
                        if plan.paired:
                            a_val, b_val = _paired_fragments(plan, buf, a_value, ml, l0, a0, g, t, mi)
                        for k in range(8 // mk if plan.paired else 1):
                            for wm in range(wm_n):
                                amat = np.full((mm, mk), np.nan)
                                for i in range(mm * mk // 32):
                                    amat[g + 8 * (i % mi), t + 4 * (i // mi)] = (
                                        a_val[wm * mi + i % mi, k + i // mi] if plan.paired else
                                        a_value(f_off(ml + t + 4 * (i // mi), l0 + wm * mm + g + 8 * (i % mi))))
                                for wn in range(wn_n):
                                    bmat = np.full((mk, 8), np.nan)
                                    for i in range(mk // 4):
                                        bmat[t + 4 * i, g] = (
                                            b_val[wn, k + i] if plan.paired else
                                            buf[nf * fp + (a0 + wn * 8 + g) * ds + ml + t + 4 * i])
                                    _mma(acc[wm, wn], amat, bmat, g, t)
                accs[tile] = acc
            for tile in range(tiles_l * tiles_a):
                l0, a0 = origin(tile)
                if plan.parity:
                    if a0 >= na:
                        continue  # a w tile: written with its u tile's nodes
                    partner = tile + warps * iters // 2  # the same warp's iteration it + ITER / 2
                    assert partner % warps == tile % warps and origin(partner) == (l0, a0 + na)
                for wm in range(wm_n):
                    for wn in range(wn_n):
                        for r in range(c_regs):
                            dl, da = _c_fragment(r, g, t)
                            l = l0 + (_paired_line(plan, wm * mi + r // 2, g) if plan.paired else wm * mm + dl)
                            a = a_org + a0 + wn * 8 + da
                            face = e * 6 * nq * nq + _stream_face_off(plan, l, k0, j0, i0)
                            if plan.parity:
                                u, w = accs[tile][wm, wn, r], accs[partner][wm, wn, r]
                                outputs = ((a, u + w, 2 * d), (nq - 1 - a, w - u, 2 * d + 1))
                            else:
                                outputs = ((a, accs[tile][wm, wn, r], None),)
                            for at, value, side in outputs:
                                n = _stream_node(plan, at, l, k0, j0, i0)
                                val = me[n] * value
                                if plan.parity:  # both faces at the u position a == 0 (parity_epilogue)
                                    val = val + np.where(a == 0, fstar[face + side * nq * nq], 0.0)
                                else:
                                    val = val + np.where(a == 0, fstar[face + 2 * d * nq * nq], 0.0)
                                    val = val + np.where(a == nq - 1, fstar[face + (2 * d + 1) * nq * nq], 0.0)
                                gi = e * nq**3 + n
                                dqdt[gi] = -val if plan.first else dqdt[gi] - val


def trace_cluster_exterior(config: FusedConfig, plan: KernelPlan, fields: Mapping[str, np.ndarray],
                           mesh: dg.Mesh) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The exterior traces of q, u, v, w at every face node as a kernel with ``trace_cluster``
    fetches them (the template's formulas): node pg of element ep = pg / NQ3 from ep's staged tiles
    (q's tile QTILE, the carried directions' velocity tiles, at tile_off of pg's in-element point)
    when ep / C == e / C, else from global memory; and which nodes came from a peer."""
    nq, ne, c = mesh.nq, mesh.num_elements, config.trace_cluster
    nq3 = nq**3
    vmap_p = mesh.face_maps[1].reshape(ne, -1)
    flat = {k: np.ascontiguousarray(fields[k]).reshape(-1) for k in ("q", "u", "v", "w")}
    # every block's tiles as it stages them (box = the whole element: origin 0), over the grid padded
    # to whole clusters: block b stages element min(b, ne - 1) (a padded block, the last element)
    kk, jj, ii = (a.ravel() for a in np.meshgrid(np.arange(nq), np.arange(nq), np.arange(nq), indexing="ij"))
    dirs = plan.kernel.dirs
    qtile = len(dirs) * plan.tile_doubles
    blocks = -(-ne // c) * c
    tiles = np.full((blocks, qtile + plan.tile_doubles), np.nan)
    node = kk * nq * nq + jj * nq + ii
    for b in range(blocks):
        e = min(b, ne - 1)
        tiles[b, qtile + tile_offset(plan, kk, jj, ii)] = flat["q"][e * nq3 + node]
        for n, d in enumerate(dirs):
            tiles[b, n * plan.tile_doubles + tile_offset(plan, kk, jj, ii)] = flat["uvw"[d]][e * nq3 + node]
    e_of = np.repeat(np.arange(ne), vmap_p.shape[1]).reshape(vmap_p.shape)  # the live blocks' elements
    pg = vmap_p
    ep = pg // nq3
    peer = ep // c == e_of // c
    # the peer's block: rank ep % C of this block's cluster (the template's mapa target)
    peer_block = np.where(peer, e_of // c * c + ep % c, 0)
    po = pg - ep * nq3
    tp = tile_offset(plan, po // (nq * nq), po // nq % nq, po % nq)
    out = {}
    for name, offset in (("q", qtile), *((("u", "v", "w")[d], n * plan.tile_doubles) for n, d in enumerate(dirs))):
        out[name] = np.where(peer, tiles[peer_block, offset + tp], flat[name][pg])
    for name in ("u", "v", "w"):
        out.setdefault(name, flat[name][pg])  # a direction the kernel does not carry: global memory
    return out, peer


def _staging_pairs(plan: KernelPlan) -> list[tuple[int, int, int]]:
    """Box-local (k, j, i) of the first point of every pair the staging loop loads, in the template's
    enumeration (thread tid takes n = 2 tid + 2 r THREADS; all threads together every even n)."""
    bk, bj, bi = plan.kernel.box
    threads = plan.element_threads
    out = []
    for tid in range(threads):
        for n in range(2 * tid, bk * bj * bi, 2 * threads):
            out.append((n // (bi * bj), n // bi % bj, n % bi))
    return out


def _x_face_pair(plan: KernelPlan, p: tuple[int, int, int]) -> tuple[int, int] | None:
    """(side, line) of the x-face node a staging pair holds (the template's ``p.i == 0 || p.i ==
    BI - 2`` branch: side = p.i != 0, line = Dir<0>::line(p) = p.k * BJ + p.j), or None."""
    _, bj, bi = plan.kernel.box
    k, j, i = p
    if i not in (0, bi - 2):
        return None
    return int(i != 0), k * bj + j


def x_face_interior(plan: KernelPlan, fields: Mapping[str, np.ndarray], mesh: dg.Mesh) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The interior traces of q, u, v, w at every x-face node ([e, side, b * Nq + a]) as a kernel with
    ``traces = "xfaces"`` takes them (the template's formulas): every staging pair holding an x-face
    node (:func:`_x_face_pair`) forms slot idx = side * NQ2 + Dir<0>::face_off(l, k0, j0, i0) from
    its point g + side; and how many times each slot was formed. vmapM is not read (the path checks
    the mesh first: composer.fused.traces), so a wrong formula here shows as a wrong value, and a slot
    no pair forms stays NaN. (With x_pairs the shared face's slots are formed by x_pair_traces.)"""
    nq, ne = mesh.nq, mesh.num_elements
    bk, bj, bi = plan.kernel.box
    assert bi == nq and 0 in plan.kernel.dirs, "an x-carrying kernel holds whole i lines"
    flat = {k: np.ascontiguousarray(fields[k]).reshape(-1) for k in ("q", "u", "v", "w")}
    out = {k: np.full((ne, 2, nq * nq), np.nan) for k in flat}
    formed = np.zeros((ne, 2, nq * nq), dtype=int)
    pairs = [(p, x) for p in _staging_pairs(plan) if (x := _x_face_pair(plan, p)) is not None]
    for e in range(ne):
        for box in range(plan.blocks_per_element):
            k0, j0, i0 = _box_origin(box, plan.kernel.box, nq)
            for (k, j, i), (side, line) in pairs:
                if plan.x_pairs and side != e % 2:
                    continue  # the shared face: its node goes to the pair buffer (x_pair_traces)
                g = e * nq**3 + (k0 + k) * nq * nq + (j0 + j) * nq + i0 + i
                face = (k0 + line // bj) * nq + (j0 + line % bj)  # Dir<0>::face_off(l, k0, j0, i0)
                for name in flat:
                    out[name][e, side, face] = flat[name][g + side]
                formed[e, side, face] += 1
    return out, formed


def x_pair_traces(plan: KernelPlan, fields: Mapping[str, np.ndarray], mesh: dg.Mesh
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """With ``x_pairs``: the interior and exterior traces of q, u, v, w at the shared x face of every
    element ([e, b * Nq + a]; element 2b's high face, 2b + 1's low face) as the kernel takes them (the
    template's formulas): a staging pair of half h (element 2b + h) whose x-face node has side != h
    writes the node g + side into xpair[h][field][line]; after the barrier, thread tid of half h forms
    lines l = tid, tid + THREADS, ... of its face side 1 - h from xpair[h] (interior) and
    xpair[1 - h] (exterior). vmapP is not read (the path checks the pairing first:
    composer.fused.traces); a slot no pair writes stays NaN. Also how many times each line was
    written to the buffer."""
    nq, ne = mesh.nq, mesh.num_elements
    _, bj, _ = plan.kernel.box
    nl = nq * nq
    flat = {k: np.ascontiguousarray(fields[k]).reshape(-1) for k in ("q", "u", "v", "w")}
    inner = {k: np.full((ne, nl), np.nan) for k in flat}
    outer = {k: np.full((ne, nl), np.nan) for k in flat}
    written = np.zeros((ne, nl), dtype=int)
    pairs = [(p, x) for p in _staging_pairs(plan) if (x := _x_face_pair(plan, p)) is not None]
    for block in range(ne // 2):
        xpair = {k: np.full((2, nl), np.nan) for k in flat}
        for half in (0, 1):
            e = 2 * block + half
            for (k, j, i), (side, line) in pairs:
                if side == half:
                    continue  # an outer face: formed in the staging loop (x_face_interior)
                g = e * nq**3 + k * nq * nq + j * nq + i
                for name in flat:
                    xpair[name][half, line] = flat[name][g + side]
                written[e, line] += 1
        for half in (0, 1):
            e, other = 2 * block + half, 1 - half
            for tid in range(plan.element_threads):
                for line in range(tid, nl, plan.element_threads):
                    face = (line // bj) * nq + line % bj  # Dir<0>::face_off(l, 0, 0, 0)
                    for name in flat:
                        inner[name][e, face] = xpair[name][half, line]
                        outer[name][e, face] = xpair[name][other, line]
    return inner, outer, written


def x_chain_traces(plan: KernelPlan, fields: Mapping[str, np.ndarray], mesh: dg.Mesh
                   ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """With ``x_chain``: the interior and exterior traces of q, u, v, w at the x faces an element shares
    with its chain neighbours ([e, side, b * Nq + a]; NaN elsewhere) as the kernel takes them (the
    template's formulas): in the element loop, the staging pair of element e = L b + sub whose x-face node
    is on side 1 (sub < L - 1) writes node g + 1 into carry[sub % 2][field][line]; the pair on side 0
    (sub > 0) reads carry[(sub - 1) % 2][field][line] and forms the face slot idx (its element's side 0)
    and the slot idx - NFACE + NQ2 (the previous element's side 1, interior and exterior swapped). vmapP
    is not read (the path checks the chains first: composer.fused.traces). Also how many times each
    slot was formed."""
    nq, ne = mesh.nq, mesh.num_elements
    length = plan.x_chain
    _, bj, _ = plan.kernel.box
    nl, nq2, nface = nq * nq, nq * nq, 6 * nq * nq
    flat = {k: np.ascontiguousarray(fields[k]).reshape(-1) for k in ("q", "u", "v", "w")}
    inner = {k: np.full((ne * 2 * nl,), np.nan) for k in flat}
    outer = {k: np.full((ne * 2 * nl,), np.nan) for k in flat}
    formed = np.zeros(ne * 2 * nl, dtype=int)
    pairs = [(p, x) for p in _staging_pairs(plan) if (x := _x_face_pair(plan, p)) is not None]
    for block in range(ne // length):
        carry = {k: np.full((2, nl), np.nan) for k in flat}
        for sub in range(length):
            e = block * length + sub
            for (k, j, i), (side, line) in pairs:
                g = e * nq**3 + k * nq * nq + j * nq + i  # the pair's first point (base + offsets, box at 0)
                idx = e * nface + side * nq2 + (line // bj) * nq + line % bj  # Dir<0>::face_off(l, 0, 0, 0)
                if side == 1 and sub < length - 1:
                    for name in flat:
                        carry[name][sub % 2, line] = flat[name][g + 1]
                elif side == 0 and sub > 0:
                    own, high = _x_slot(idx, nq), _x_slot(idx - nface + nq2, nq)
                    for name in flat:
                        node, prev = flat[name][g], carry[name][(sub - 1) % 2, line]
                        inner[name][own], outer[name][own] = node, prev
                        inner[name][high], outer[name][high] = prev, node
                    formed[own] += 1
                    formed[high] += 1
    shape = (ne, 2, nl)
    return ({k: v.reshape(shape) for k, v in inner.items()}, {k: v.reshape(shape) for k, v in outer.items()},
            formed.reshape(shape))


def _store_held_pairs(plan: KernelPlan, e: int, pend: np.ndarray, fstar: np.ndarray, dqdt: np.ndarray) -> None:
    """Element e of a chain stores the pairs element e - 1 held back, as the template does in its staging
    loop: -pend at (i = Nq - 2) and -(pend + the flux of their shared face, e - 1's high side: the slot
    idx - NFACE + NQ2 of e's low-face slot idx) at i = Nq - 1, at :func:`x_chain_deferred_store`'s index."""
    nq = plan.nq
    _, bj, _ = plan.kernel.box
    for line in range(nq * nq):
        store, slot = x_chain_deferred_store(plan, line, e)
        idx = e * 6 * nq * nq + (line // bj) * nq + line % bj  # e's low x face: Dir<0>::face_off(l, 0, 0, 0)
        dqdt[store] = -pend[slot]
        dqdt[store + 1] = -(pend[slot + 1] + fstar[idx - 6 * nq * nq + nq * nq])


def _x_slot(idx: int, nq: int) -> int:
    """The [e, side, b * Nq + a] slot (flat, two x sides per element) of face index ``idx`` (the
    kernel's e * NFACE + face * NQ2 + node), which must be on an x face."""
    e, rest = divmod(idx, 6 * nq * nq)
    face, node = divmod(rest, nq * nq)
    assert face < 2, f"face index {idx} is not on an x face"
    return (2 * e + face) * nq * nq + node


def x_chain_deferred_store(plan: KernelPlan, line: int, e: int) -> tuple[int, int]:
    """Where the kernel of an ``x_chain`` table stores the point pair (i = Nq - 2, Nq - 1) of x line
    ``line`` of element e - 1 once element e has formed their shared face's flux (the template's
    ``gp = g - NQ3 + NQ - 2`` from e's staging pair g at i = 0), and which pend slot pair it reads
    (``PEND + 2 * line``, written by e - 1's store loop at its pair of that line)."""
    nq = plan.nq
    _, bj, _ = plan.kernel.box
    k, j = line // bj, line % bj
    g = e * nq**3 + k * nq * nq + j * nq
    return g - nq**3 + nq - 2, 2 * (k * bj + j)


def emulate(config: FusedConfig, fields: Mapping[str, np.ndarray], grid: object,
            launches: Sequence[tuple[int, int, int]] | None = None,
            element_order: np.ndarray | None = None) -> np.ndarray:
    """dqdt as the fused kernels of ``config`` would compute it (volume layout [e, k, j, i]).

    ``launches``: the box kernels' launches in the order they run, each (volume kernel index, first
    element, end), as a chunked table's path issues them (``chunk_elements``: the kernel's e0 and ne);
    default: each kernel once over every element. ``element_order``: the element each block position
    takes (default: the path's brick order of ``element_bricks``, x pairs as two consecutive positions,
    else position b takes element b).
    dqdt starts as NaN, so an element no launch covers shows."""
    mesh = dg.Mesh(config.order, grid)
    nq, ne = mesh.nq, mesh.num_elements
    if element_order is None and config.element_bricks is not None:
        element_order = element_sequence(mesh.grid, config.element_bricks, config.x_pairs)
    flat = {k: np.ascontiguousarray(fields[k]).reshape(-1) for k in dg.FIELD_KEYS}
    vmap_p = mesh.face_maps[1]
    if not config.exterior_maps:
        # the kernels take every exterior node from its face's link (linked_node of _face_links.cuh.j2)
        links, wrong = face_links(vmap_p, nq)
        assert wrong is None, "the path refuses exterior_maps = false on this mesh"
        vmap_p = linked_nodes(links, nq)
    fstar = dg.numerical_flux(fields, mesh, vmap_p).reshape(-1)  # same formula as _flux.cuh.j2
    if config.trace_cluster > 1:
        # each kernel's faces (those of its directions) with the exterior traces it fetches
        vmap_m = mesh.face_maps[0]
        nx, ny, nz = fields["nx"], fields["ny"], fields["nz"]
        interior = {k: np.ascontiguousarray(fields[k]).reshape(-1)[vmap_m] for k in ("q", "u", "v", "w")}
        fstar = fstar.reshape(vmap_m.shape).copy()
        for plan in kernel_plans(config):
            exterior, _ = trace_cluster_exterior(config, plan, fields, mesh)
            ext = {k: v.reshape(vmap_m.shape) for k, v in exterior.items()}
            flux = dg.reference.upwind(interior["q"], interior["u"] * nx + interior["v"] * ny + interior["w"] * nz,
                                       ext["q"], ext["u"] * nx + ext["v"] * ny + ext["w"] * nz, fields["F"])
            faces = [2 * d + side for d in plan.kernel.dirs for side in (0, 1)]
            fstar[:, faces] = flux[:, faces]
        fstar = fstar.reshape(-1)
    if config.traces == "xfaces":
        # the x faces' interior traces from each x-carrying kernel's staging pairs (the others gathered)
        from composer.fused.traces import x_face_maps_problem

        vmap_m = mesh.face_maps[0]
        assert x_face_maps_problem(vmap_m, nq) is None, "the path refuses xfaces on this mesh"
        shape = (mesh.num_elements, 6, nq * nq)
        normal = [fields[k].reshape(shape)[:, :2] for k in ("nx", "ny", "nz")]
        exterior = {k: np.ascontiguousarray(fields[k]).reshape(-1)[vmap_p].reshape(shape)[:, :2] for k in ("q", "u", "v", "w")}
        fstar = fstar.reshape(shape).copy()
        for plan in kernel_plans(config):
            if not getattr(plan, "x_traces", False):
                continue
            inner, _ = x_face_interior(plan, fields, mesh)
            outer = {k: v.copy() for k, v in exterior.items()}
            if config.x_chain:
                # the faces shared inside each chain: both traces from the carried nodes
                from composer.fused.traces import x_chain_maps_problem

                assert x_chain_maps_problem(vmap_p, nq, plan.x_chain) is None, "the path refuses x_chain on this mesh"
                chain_in, chain_out, formed = x_chain_traces(plan, fields, mesh)
                shared = formed > 0
                for k in inner:
                    inner[k][shared] = chain_in[k][shared]
                    outer[k][shared] = chain_out[k][shared]
            if config.x_pairs:
                # the shared face of each pair: both traces from the pair buffer
                from composer.fused.traces import x_pairs_maps_problem

                assert x_pairs_maps_problem(vmap_p, nq) is None, "the path refuses x_pairs on this mesh"
                pair_in, pair_out, _ = x_pair_traces(plan, fields, mesh)
                shared = np.arange(mesh.num_elements) % 2 == 0  # element 2b: side 1; 2b + 1: side 0
                for k in inner:
                    for side, rows in ((1, shared), (0, ~shared)):
                        inner[k][rows, side] = pair_in[k][rows]
                        outer[k][rows, side] = pair_out[k][rows]
            fstar[:, :2] = dg.reference.upwind(
                inner["q"], inner["u"] * normal[0] + inner["v"] * normal[1] + inner["w"] * normal[2],
                outer["q"], outer["u"] * normal[0] + outer["v"] * normal[1] + outer["w"] * normal[2],
                fields["F"].reshape(shape)[:, :2])
        fstar = fstar.reshape(-1)
    if not config.interior_maps:
        # the kernels address every face's interior trace from the layout: the same nodes as vmapM here
        from composer.fused.traces import interior_maps_problem

        assert interior_maps_problem(mesh.face_maps[0], nq) is None, "the path refuses interior_maps = false on this mesh"
    dmat = dg.diff_matrix(config.order)
    if config.parity:  # the kernels read the parity rows where they read D (composer.parity)
        from composer.parity.reference import parity_rows

        dmat = parity_rows(dmat)
    dqdt = np.full(mesh.num_points, np.nan)
    vel, metric = (flat["u"], flat["v"], flat["w"]), (flat["Ex"], flat["Ey"], flat["Ez"])
    plans = kernel_plans(config)
    for index, first, end in launches if launches is not None else [(i, 0, ne) for i in range(len(plans))]:
        plan = plans[index]
        if isinstance(plan, StreamPlan):
            assert (first, end) == (0, ne), "a streamed kernel runs over every element"
            _emulate_stream(config, plan, flat, fstar, dmat, dqdt, ne)
            continue
        bk, bj, bi = plan.kernel.box
        pend = np.full(2 * bk * bj, np.nan)  # x_chain: the held point pairs of the element before ([line][2])
        kk, jj, ii = np.meshgrid(np.arange(bk), np.arange(bj), np.arange(bi), indexing="ij")
        kk, jj, ii = kk.ravel(), jj.ravel(), ii.ravel()
        split, cluster = plan.kernel.split, plan.kernel.cluster
        for position in range(first, end):
            e = position if element_order is None else int(element_order[position])

            def gidx(k, j, i, box):
                k0, j0, i0 = _box_origin(box, plan.kernel.box, nq)
                return e * nq**3 + (k0 + k) * nq * nq + (j0 + j) * nq + i0 + i

            def stage(d: int, box: int) -> np.ndarray:
                tile = np.full(plan.tile_doubles, np.nan)  # a point the template never stages stays NaN
                g = gidx(kk, jj, ii, box)
                tile[tile_offset(plan, kk, jj, ii)] = flat["q"][g] * vel[d][g]
                return tile

            # every block stages its resident tiles before any contraction (the cluster_sync of a
            # clustered kernel); with flux_tiles, the later directions are staged below
            staged = [[stage(d, box) for d in plan.kernel.dirs[:plan.flux_tile_count]]
                      for box in range(plan.blocks_per_element)]
            for box in range(plan.blocks_per_element):
                k0, j0, i0 = _box_origin(box, plan.kernel.box, nq)
                tiles = staged[box]
                first_rank = box - box % cluster  # the cluster's blocks are consecutive boxes
                acc = tiles[0]
                for n, d in enumerate(plan.kernel.dirs):
                    if plan.restaged(n):  # into the tile the previous direction freed (never the accumulator)
                        assert plan.tile_slot(n) > 0, f"{plan.name}: a restaged tile would overwrite the accumulator"
                        tiles[plan.tile_slot(n)] = stage(d, box)
                    tile = tiles[plan.tile_slot(n)]
                    if config.engine == "simt":
                        pts, vals = _contract_simt(plan, d, tile, dmat, nq)
                    elif d == split:
                        # the template's dispatch: run_cluster, a later direction's staged contraction
                        assert n > 0 and plan.d_panel, f"{plan.name}: a split direction runs run_cluster"
                        peers = [staged[first_rank + h][n] for h in range(cluster)]
                        pts, vals = _contract_mma(plan, d, tile, dmat, nq, config.mma or "", peers,
                                                  (i0, j0, k0)[d])
                    else:
                        pts, vals = _contract_mma(plan, d, tile, dmat, nq, config.mma or "")
                    for (k, j, i), val in zip(pts, vals):
                        off = tile_offset(plan, k, j, i)
                        weighted = metric[d][gidx(k, j, i, box)] * val
                        if n == 0:
                            acc[off] = weighted
                        else:
                            acc[off] = acc[off] + weighted
                val = acc[tile_offset(plan, kk, jj, ii)].copy()
                # x_chain: an element before its chain's last leaves out its high x face's lift (the next
                # element forms that flux) and holds its point pairs at i = Nq - 2 back
                defer = bool(plan.x_chain) and e % plan.x_chain < plan.x_chain - 1
                for d in plan.kernel.dirs:
                    pos = (ii + i0, jj + j0, kk + k0)[d]  # along the whole axis (a split one's chunk moved)
                    face = {0: (kk + k0) * nq + (jj + j0), 1: (kk + k0) * nq + (ii + i0),
                            2: (jj + j0) * nq + (ii + i0)}[d]
                    for side, where in ((0, pos == 0), (1, pos == nq - 1)):
                        if defer and d == 0 and side == 1:
                            continue
                        idx = e * 6 * nq * nq + (2 * d + side) * nq * nq + face
                        val = val + np.where(where, fstar[np.where(where, idx, 0)], 0.0)
                g = gidx(kk, jj, ii, box)
                out = -val if plan.first else dqdt[g] - val
                if plan.x_chain:
                    assert plan.first and box == 0, "a chain is one whole-element kernel"
                    if e % plan.x_chain:
                        _store_held_pairs(plan, e, pend, fstar, dqdt)
                    held = (ii >= nq - 2) & defer
                    pend[2 * (kk[held] * plan.kernel.box[1] + jj[held]) + ii[held] - (nq - 2)] = val[held]
                    dqdt[g[~held]] = out[~held]
                else:
                    dqdt[g] = out
    return dqdt.reshape(mesh.volume_shape)
