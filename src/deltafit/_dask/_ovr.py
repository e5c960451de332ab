"""One-vs-rest for the smooth losses (logistic, squared hinge) and the hinge on rows persisted
on a Dask cluster: K binary problems over one row store, solved jointly, one pass serving
every class.

A classifier of K ≥ 3 classes solves, for each class k, the binary problem whose targets are
``+1`` for the samples of class k and ``-1`` for the others (scikit-learn's
``OneVsRestClassifier``, the same C for every class; ARCHITECTURE.md, "The problem").  The rows
are persisted once (:class:`~._dask_rows.DaskRowStore`) with each sample's class *index*; a
block task codes them per class.  Every *pass* maps one task per block
(:func:`ovr_block_share`) that answers the request of each class still solving — its J, ∇J
(the p × K gradients in one product ``Φᵀ [cw ℓ'_1, …, cw ℓ'_K]``), when asked ∇J(0), its
Hessian ``Φᵀ diag(cw ℓ''_k) Φ`` (K × p × p at most), the squared hinge's switched-row
correction, or J along the step ladder — and the shares are summed in a tree (fan-in 8):
nothing n-sized reaches the client.

Each class runs the binary solver of :mod:`._dask_newton` unchanged (:func:`dask_newton` for
the fit, :func:`dask_chord` then Newton for an update: Ortega & Rheinboldt 1970, §7.1;
Nocedal 1980; Keerthi & DeCoste, JMLR 2005, for the squared hinge), each in its own thread
against a pass object whose ``run`` hands the request to a driver and waits: the driver makes
one joint pass as soon as every class still solving waits for one (:func:`solve_jointly`).  A
class whose solve has ended asks for nothing more, so a fit or an update makes as many passes
as its slowest class needs, not K times one class's.  Each class keeps its binary state
(:class:`~._dask_newton.DaskNewtonState`: β_k, the exact Hessian at β_ref,k, and J, ∇J,
∇J(0) at β_k), so its certificate ``grad_norm`` bounds ``‖β_k − β_k*‖`` as in the binary
case (Okumura et al., KDD'15, Thm 6).

**Hinge** (``base`` :class:`~._dask_hinge.DaskHingeState`): each class runs the binary
decomposition method of :mod:`._dask_hinge` unchanged — its smoothed start (Newton on the
smoothed hinge: requests carrying ``loss``) and its hinge passes (requests with ``hinge``:
β_ref, β, the ids of its working set, the rounding weights ``v``) — in its own thread, and
a joint pass (:func:`ovr_pass_share`) answers the smooth requests by
:func:`ovr_block_share` and the hinge ones by :func:`~._dask_hinge.hinge_shares` (one product
of each chunk with every class's β and β_ref).  Each class keeps its
:class:`~._dask_hinge.DaskHingeState` (β_ref, working set, sums), so its solution, passes,
duality gap and certified radius are those of its binary Dask model.  An update codes the
changed rows per class and re-solves every class jointly
(:meth:`~._dask_hinge.DaskHingeState.re_solved`: new states, committed when every class
succeeded).

The user's ``callback`` (smooth losses) is called from the class threads one call at a time
(a lock).
"""

from __future__ import annotations

import threading

import numpy as np

from deltafit._dask._newton import (
    _CHUNK_BYTES,
    LADDER,
    DaskNewtonState,
    Share,
    _Chunk,
    block_curvature,
    dask_chord,
    dask_newton,
    no_descent,
    prepare_block,
    warn_unconverged,
)
from deltafit._dask._rows import BlockMods
from deltafit._states._one_vs_rest import OneVsRestState, _class_label, class_codes
from deltafit.solvers import solve_label

__all__ = [
    "ovr_block_share",
    "ovr_pass_share",
    "prepare_ovr_block",
    "start_requests",
    "OvrPasses",
    "solve_jointly",
    "DaskOneVsRestState",
]


def _columns(beta, want):
    """The vectors a request evaluates scores at: ``[base, step]`` of a ladder request, else
    ``[β]`` and β_ref when asked."""
    line, ref = want.get("line"), want.get("ref")
    if line is not None:
        return [line[0], line[1]]
    return [beta] + ([ref] if ref is not None else [])


def ovr_block_share(x, t, w, mods, spec, requests):
    """One block's share of a joint pass (a Dask task): ``{k: Share}`` for every request
    ``(k, β_k, want_k)``, ``want_k`` the keywords of
    :func:`~._dask_newton.block_share` (``g0``, ``value``, ``hessian``, ``ref``, ``line``)
    and ``t`` the rows' class indices.  The scores of every class are one product Φ B and
    the gradients one product Φᵀ D, a chunk of rows at a time."""
    C = spec.C
    x, t, cw = mods.rows(x, t, w, C)
    n = x.shape[0]
    cols, first = [], []
    for _, beta, want in requests:
        first.append(len(cols))
        cols.extend(_columns(beta, want))
    B = np.column_stack(cols)
    p = B.shape[0]
    acc = []
    for _, _, want in requests:
        acc.append(
            {
                "val": 0.0,
                "n_sw": 0,
                "G": np.zeros((p, 2 if want.get("g0") else 1)),
                "H": np.zeros((p, p)) if want.get("hessian") else None,
                "dH": np.zeros((p, p)) if want.get("ref") is not None else None,
                "lad": np.zeros(LADDER.size) if want.get("line") is not None else None,
            }
        )
    step = max(64, _CHUNK_BYTES // (8 * max(p, 1)))
    for a in range(0, n, step):
        b = min(n, a + step)
        Phi = _Chunk(x[a:b], spec)
        Z = Phi.dot(B)
        tc, wc = t[a:b], cw[a:b]
        D, owner = [], []  # derivative columns, summed by one Φᵀ D
        for j, (k, _, want) in enumerate(requests):
            tk, z, out = class_codes(tc, k), Z[:, first[j]], acc[j]
            loss = want.get("loss") or spec.loss  # a hinge class's smoothed start
            if out["lad"] is not None:
                dz = Z[:, first[j] + 1]
                for i, s in enumerate(LADDER):
                    out["lad"][i] += float(wc @ loss.value(tk, z + s * dz))
                continue
            if want.get("value", True):
                out["val"] += float(wc @ loss.value(tk, z))
            D.append(wc * loss.d1(tk, z))
            owner.append((j, 0))
            if want.get("g0"):
                D.append(wc * loss.d1(tk, np.zeros(b - a)))
                owner.append((j, 1))
            if out["H"] is not None:
                out["H"] += Phi.weighted_gram(wc * loss.d2(tk, z))
            if out["dH"] is not None:
                dn = wc * loss.d2(tk, z)
                dr = wc * loss.d2(tk, Z[:, first[j] + 1])
                sw = np.flatnonzero(dn != dr)
                if sw.size:
                    out["n_sw"] += sw.size
                    out["dH"] += Phi.weighted_gram((dn - dr)[sw], sw)
        if D:
            G = Phi.tdot(np.column_stack(D))
            for c, (j, i) in enumerate(owner):
                acc[j]["G"][:, i] += G[:, c]
    return Shares(
        {
            k: Share(o["val"], o["G"], o["H"], o["dH"], o["n_sw"], o["lad"], n)
            for (k, _, _), o in zip(requests, acc)
        }
    )


class Shares(dict):
    """``{k: Share}`` of a joint pass; ``+`` adds class by class."""

    def __add__(self, other):
        out = Shares(self)
        for k, v in other.items():
            out[k] = out[k] + v
        return out


def _sum(*shares):
    """The sum of blocks' :class:`Shares`."""
    out = shares[0]
    for s in shares[1:]:
        out = out + s
    return out


def start_requests(beta0):
    """The fit's first requests: every class's J, ∇J, ∇J(0) and Hessian at its column of
    ``beta0`` (p × K)."""
    return [
        (k, np.array(beta0[:, k], dtype=np.float64), {"g0": True, "hessian": True})
        for k in range(beta0.shape[1])
    ]


def prepare_ovr_block(x, y, w, problem, offset, spec, beta0):
    """The one-vs-rest fit's one pass over a block (a Dask task): what
    :func:`~._dask_newton.prepare_block` returns, its share that of every class's start
    (:func:`start_requests`), so the pass that persists the rows also evaluates the start
    (and its largest sample curvature, the same for every class)."""
    (x, t, w), pieces, counts, _, _ = prepare_block(x, y, w, problem, offset, None, None)
    share = None
    if spec is not None:
        share = ovr_block_share(x, t, w, BlockMods(), spec, start_requests(beta0))
    return (x, t, w), pieces, counts, share, block_curvature(x, w, spec)


def _frozen(want):
    """A request's keywords with its arrays copied (the solver may reuse its own)."""
    out = {}
    for key, v in want.items():
        if isinstance(v, tuple):
            v = tuple(np.array(a, dtype=np.float64, copy=True) for a in v)
        elif isinstance(v, np.ndarray):
            v = np.array(v, copy=True)
        out[key] = v
    return out


def ovr_pass_share(x, t, w, mods, spec, first, requests, k):
    """One block's share of a joint pass in which some classes may solve the hinge (a Dask
    task): the requests with ``want["hinge"]`` are answered by
    :func:`~._dask_hinge.hinge_shares` (``want``: ``hinge_ref`` β_ref, ``wids`` the sorted
    ids of the class's working set, ``v``; ``first`` the block's first sample id, ``k`` rows
    kept of each kind), the others by :func:`ovr_block_share`."""
    from deltafit._dask._hinge import hinge_shares

    hinge = [r for r in requests if r[2].get("hinge")]
    smooth = [r for r in requests if not r[2].get("hinge")]
    out = Shares()
    if smooth:
        out.update(ovr_block_share(x, t, w, mods, spec, smooth))
    if hinge:
        got = hinge_shares(
            x,
            t,
            w,
            mods,
            spec,
            first,
            [(c, want["hinge_ref"], beta, want["wids"], want["v"]) for c, beta, want in hinge],
            k,
        )
        out.update({c: sh for (c, _, _), sh in zip(hinge, got)})
    return out


class OvrPasses:
    """Joint passes over the store's blocks: ``run(requests)`` is one tree-summed
    ``{k: Share}`` (or :class:`~._dask_hinge.HingeShare` for a hinge request, ``k_rows``
    candidate rows kept of each kind); ``count`` passes so far."""

    def __init__(self, store, spec, k_rows=0):
        self.store, self.spec, self.count, self.k_rows = store, spec, 0, int(k_rows)

    def run(self, requests):
        from dask import delayed
        from deltafit._dask._rows import tree_compute

        requests = [
            (int(k), np.array(beta, dtype=np.float64, copy=True), _frozen(want))
            for k, beta, want in requests
        ]
        st = self.store
        if any(want.get("hinge") for _, _, want in requests):
            tasks = [
                delayed(ovr_pass_share)(
                    x, t, w, st.mods(i), self.spec, int(st.starts[i]), requests, self.k_rows
                )
                for i, (x, t, w) in enumerate(st.blocks)
            ]
        else:
            tasks = [
                delayed(ovr_block_share)(x, t, w, st.mods(i), self.spec, requests)
                for i, (x, t, w) in enumerate(st.blocks)
            ]
        out = tree_compute(tasks, _sum, what="a joint pass of the classes")
        self.count += 1
        return out


class _HingeView:
    """What a hinge class's decomposition method sees as its passes
    (:class:`~._dask_hinge.HingePasses`' interface) over its joint view."""

    def __init__(self, view, k):
        self._view, self.k, self.count = view, int(k), 0

    def run(self, ref, beta, wids, v):
        out = self._view.run(
            beta,
            hinge=True,
            hinge_ref=None if ref is None else np.array(ref, dtype=np.float64, copy=True),
            wids=np.array(wids, dtype=np.int64, copy=True),
            v=np.array(v, dtype=np.float64, copy=True),
        )
        self.count += 1
        return out


class _SmoothView:
    """What a hinge class's smoothed start (Newton on the smoothed hinge of width ε) sees as
    its passes over its joint view."""

    def __init__(self, view, eps):
        from deltafit.losses import SmoothedHinge

        self._view, self._loss, self.count = view, SmoothedHinge(eps), 0

    def run(self, beta, **want):
        out = self._view.run(beta, loss=self._loss, **want)
        self.count += 1
        return out


class _Aborted(Exception):
    """Raised in a class's solver thread when the joint solve is given up."""


class _Rendezvous:
    """Where the class solvers leave their pass requests and the driver its answers."""

    def __init__(self, classes):
        self.cond = threading.Condition()
        self.waiting, self.answers = {}, {}
        self.running, self.abort = set(classes), False


class _ClassPasses:
    """What class ``k``'s binary solver sees as its passes: ``run`` hands the request to the
    driver and waits for the joint pass that answers it."""

    def __init__(self, rv, k):
        self._rv, self._k = rv, k

    def run(self, beta, **want):
        rv, k = self._rv, self._k
        with rv.cond:
            if rv.abort:
                raise _Aborted
            rv.waiting[k] = (np.array(beta, dtype=np.float64, copy=True), want)
            rv.cond.notify_all()
            while k not in rv.answers:
                if rv.abort:
                    raise _Aborted
                rv.cond.wait()
            return rv.answers.pop(k)


def solve_jointly(passes, solvers):
    """Run ``solvers`` (``{k: fn(passes_k)}``, each a binary solve that asks ``passes_k.run``
    for its passes) together: one joint pass of ``passes`` (:class:`OvrPasses`) each time every
    solver still running waits for one.  Returns ``{k: fn's result}``; the first exception a
    solver raised is raised after every solver has stopped."""
    rv = _Rendezvous(solvers)
    outs, errors = {}, []

    def body(k, fn):
        try:
            outs[k] = fn(_ClassPasses(rv, k))
        except _Aborted:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised again by the driver
            with rv.cond:
                errors.append(exc)
                rv.abort = True
        finally:
            with rv.cond:
                rv.running.discard(k)
                rv.cond.notify_all()

    threads = [
        threading.Thread(target=body, args=(k, fn), daemon=True, name=f"deltafit-ovr-{k}")
        for k, fn in solvers.items()
    ]
    for th in threads:
        th.start()
    try:
        while True:
            with rv.cond:
                while rv.running and not rv.abort and len(rv.waiting) < len(rv.running):
                    rv.cond.wait()
                if rv.abort or not rv.running:
                    break
                batch = sorted(rv.waiting.items())
                rv.waiting = {}
            got = passes.run([(k, beta, want) for k, (beta, want) in batch])
            with rv.cond:
                for k, _ in batch:
                    rv.answers[k] = got[k]
                rv.cond.notify_all()
    except BaseException:
        with rv.cond:
            rv.abort = True
            rv.cond.notify_all()
        raise
    finally:
        for th in threads:
            th.join()
    if errors:
        raise errors[0]
    return outs


class DaskOneVsRestState(OneVsRestState):
    """K binary :class:`~._dask_newton.DaskNewtonState` of a logistic / squared-hinge model
    (:class:`~._dask_hinge.DaskHingeState` of a hinge model) whose rows live on a Dask
    cluster, fitted and updated jointly (see the module docstring).

    Attributes
    ----------
    states : list of DaskNewtonState or DaskHingeState
        Class k's binary state at position k.
    passes : int
        Joint passes over the rows the last solve made.
    """

    passes = 0

    def __init__(self, opts, max_rank=64, *, base=DaskNewtonState, n_classes):
        super().__init__(opts, max_rank, base=base, n_classes=n_classes)

    def blank(self):
        return type(self)(self.opts, self.max_rank, base=self.base, n_classes=self.n_classes)

    def fit(self, data, t, capacity, coef0=None, w=None):
        raise ValueError(
            "a Dask-backed one-vs-rest state is fitted from its row store "
            "(fit_passes), not from rows on the client"
        )

    def _serial_callback(self):
        """The user's callback, called by one class thread at a time (a lock): the classes'
        solvers run in threads."""
        cb = self.opts.callback
        if cb is None:
            return None
        lock = threading.Lock()

        def serial(*args):
            with lock:
                return cb(*args)

        return serial

    def _commit(self, outs, count):
        states = []
        for k in range(self.n_classes):  # every class succeeded: commit
            st = outs[k]
            if not isinstance(st, self.base):
                st = self._make()
                st._take(outs[k])
                st.passes = count
            states.append(st)
        self.states, self.passes = states, count
        return self

    def fit_passes(self, passes, beta0, first=None):
        """Damped Newton for every class from ``beta0`` (p × K), jointly; ``first``: the
        :class:`Shares` of the start (:func:`start_requests`) when a pass made them.  Hinge
        classes (``base`` :class:`~._dask_hinge.DaskHingeState`): each class's smoothed start
        and decomposition method (:meth:`~._dask_hinge.DaskHingeState.fit_with`), jointly."""
        o = self.opts
        if self.base.kind == "dask_hinge":
            return self._fit_hinge(passes, beta0, first)
        callback = self._serial_callback()

        def newton(k):
            def solve(view):
                info = {}
                out = dask_newton(
                    view,
                    beta0[:, k],
                    tol=o.tol,
                    max_iter=o.max_iter,
                    callback=callback,
                    first=None if first is None else first[k],
                    info=info,
                )
                if out is None:
                    raise no_descent("fit", info, f"{_class_label(k)}: ")
                return out

            return solve

        outs = solve_jointly(passes, {k: newton(k) for k in range(self.n_classes)})
        self._commit(outs, passes.count)
        self._warn(outs)
        return self

    def _warn(self, outs):
        """The ConvergenceWarning of every class whose solve stopped before its threshold
        (Newton at max_iter; the hinge's passes run out or stalled), in class order, from the
        caller's thread (the solves ran in the class threads)."""
        o = self.opts
        for k in range(self.n_classes):
            out = outs[k]
            with solve_label(_class_label(k)):
                if isinstance(out, tuple):
                    warn_unconverged(out, o.tol, o.max_iter)
                elif hasattr(out, "warn_unconverged"):
                    out.warn_unconverged()

    def _fit_hinge(self, passes, beta0, first):
        from deltafit._dask._hinge import fit_rows

        p = beta0.shape[0]
        n = int(passes.store.starts[-1])
        featurize = passes.spec.featurize
        passes.k_rows = fit_rows(p, n)

        def hinge(k):
            def solve(view):
                return self._make().fit_with(
                    lambda eps: _SmoothView(view, eps),
                    _HingeView(view, passes.k_rows),
                    featurize,
                    p,
                    n,
                    None if first is None else first[k],
                    beta0[:, k],
                )

            return solve

        outs = solve_jointly(passes, {k: hinge(k) for k in range(self.n_classes)})
        self._commit(outs, passes.count)
        self._warn(outs)
        return self

    def apply_change(self, change):
        """Every class's M and (J, ∇J, ∇J(0)) corrected for the change's rows (coded for the
        class), then its chord steps over the store after the change, all classes jointly;
        Newton from β_k for a class whose chord steps stall.  Hinge classes: each class's
        changed rows into its working set, then its decomposition method, jointly.  Nothing
        is changed unless every class succeeds."""
        o, loss = self.opts, self.loss
        passes = OvrPasses(change.dask_rows, self.states[0].spec(change.dask_featurize))
        Phi, t_b, cw_b, t_a, cw_a = change.dask_changed
        if self.base.kind == "dask_hinge":
            from deltafit._dask._hinge import _k_gather

            passes.k_rows = 2 * _k_gather(self.states[0].beta.shape[0])
            ids = change.dask_changed_ids

            def hinge(k):
                def solve(view):
                    coded = (Phi, class_codes(t_b, k), cw_b, class_codes(t_a, k), cw_a)
                    return self.states[k].re_solved(
                        _HingeView(view, passes.k_rows), change.dask_featurize, coded, ids
                    )

                return solve

            outs = solve_jointly(passes, {k: hinge(k) for k in range(self.n_classes)})
            self._commit(outs, passes.count)
            self._warn(outs)
            return
        callback = self._serial_callback()

        def chord(k):
            st = self.states[k]

            def solve(view):
                f, grad, g0 = st.point
                curv, beta = st.curv, st.beta
                if Phi.shape[0]:
                    tb, ta = class_codes(t_b, k), class_codes(t_a, k)
                    z, zr, zero = Phi @ beta, Phi @ st.beta_ref, np.zeros(Phi.shape[0])
                    f = f + float(cw_a @ loss.value(ta, z) - cw_b @ loss.value(tb, z))
                    G = Phi.T @ np.column_stack(
                        [
                            cw_a * loss.d1(ta, z) - cw_b * loss.d1(tb, z),
                            cw_a * loss.d1(ta, zero) - cw_b * loss.d1(tb, zero),
                        ]
                    )
                    grad, g0 = grad + G[:, 0], g0 + G[:, 1]
                    delta = cw_a * loss.d2(ta, zr) - cw_b * loss.d2(tb, zr)
                    curv = curv.corrected(Phi, delta, np.zeros(Phi.shape[0], dtype=np.intp))
                out = dask_chord(
                    view,
                    beta,
                    curv,
                    st.beta_ref,
                    loss,
                    (f, grad, g0),
                    tol=o.tol,
                    max_iter=o.max_iter,
                    callback=callback,
                )
                if out is None:
                    info = {}
                    out = dask_newton(
                        view, beta, tol=o.tol, max_iter=o.max_iter, callback=callback, info=info
                    )
                    if out is None:
                        raise no_descent("re-solve", info, f"{_class_label(k)}: ")
                return out

            return solve

        outs = solve_jointly(passes, {k: chord(k) for k in range(self.n_classes)})
        self._commit(outs, passes.count)
        self._warn(outs)

    def exact_matrix(self):
        return self.states[0].exact_matrix()

    def checkpoint(self):
        new = self.blank()
        new.states = [st.checkpoint() for st in self.states]
        new.passes = self.passes
        return new

    def to_arrays(self, keep):
        return self.states[0].to_arrays(keep)
