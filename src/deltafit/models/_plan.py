"""Planning an update: from the caller's arguments to a validated :class:`UpdatePlan`.

:class:`PlanningMixin` validates every argument of an update (rows, labels, ids, weights; for
``keep_data=False`` models the rows and current labels checked against the stored digests)
and refuses an update whose result ``fit`` would refuse (no sample left, the weight rule
broken), all before anything changes: the transaction
(:meth:`~deltafit.models.UpdatableMixin._transaction`) gets a plan it can carry out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from deltafit.models._inputs import checked_weights

__all__ = ["PlanningMixin", "UpdatePlan"]


@dataclass(frozen=True)
class UpdatePlan:
    """One validated update, before any change: what :meth:`UpdatableMixin._update` hands to
    the numerical work (``_apply``) and then to the ledger.

    Parameters
    ----------
    X_add : ndarray of shape (k, n_features) or None
        Rows to add (None: no additions).
    t_add : ndarray of shape (k,) or None
        Their encoded targets.
    remove_slots : ndarray of int or None
        Ledger slots of the samples to remove (None: no removals).
    remove_rows : ndarray or None
        Their rows as given (``keep_data=False`` models), else None.
    relabel_slots : ndarray of int or None
        Ledger slots of the samples to relabel (None: no relabels).
    relabel_t : ndarray or None
        Their new encoded targets.
    relabel_rows : ndarray or None
        Their rows as given (``keep_data=False`` models), else None.
    remove_t : ndarray or None
        The removed samples' current targets, from the caller and checked against the digests
        (``keep_data=False`` models, which keep no labels), else None.
    relabel_t_old : ndarray or None
        The relabelled samples' current targets, likewise.
    w_add : ndarray or None
        The added samples' weights (None: 1 each).
    reweight_slots, reweight_w : ndarray or None
        Ledger slots of the samples whose weight changes, and the new weights.
    reweight_rows, reweight_t : ndarray or None
        ``keep_data=False`` models: the reweighted samples' rows as given and their targets
        after the update's relabels; else None.
    changed : tuple or None
        A model that keeps no labels: ``(before, after)`` of the samples the update touches,
        lists of ``(targets, weights)`` (see :meth:`UpdatableMixin._samples_changed`), taken
        while the ledger is as before the update; else None.
    """

    X_add: np.ndarray | None = None
    t_add: np.ndarray | None = None
    remove_slots: np.ndarray | None = None
    remove_rows: np.ndarray | None = None
    relabel_slots: np.ndarray | None = None
    relabel_t: np.ndarray | None = None
    relabel_rows: np.ndarray | None = None
    remove_t: np.ndarray | None = None
    relabel_t_old: np.ndarray | None = None
    w_add: np.ndarray | None = None
    reweight_slots: np.ndarray | None = None
    reweight_w: np.ndarray | None = None
    reweight_rows: np.ndarray | None = None
    reweight_t: np.ndarray | None = None
    changed: tuple | None = None

    @property
    def reweights(self):
        """Whether the update changes sample weights."""
        return self.reweight_slots is not None

    @property
    def adds(self):
        """Whether the update adds samples."""
        return self.X_add is not None

    @property
    def removes(self):
        """Whether the update removes samples."""
        return self.remove_slots is not None

    @property
    def relabels(self):
        """Whether the update relabels samples."""
        return self.relabel_slots is not None


class PlanningMixin:
    """Validation of an update into an :class:`UpdatePlan`, and the checks of its outcome,
    for :class:`~deltafit.models.UpdatableMixin` (scikit-learn style mixin: no state of its
    own)."""

    def _plan_update(
        self,
        X_add=None,
        y_add=None,
        remove_ids=None,
        X_remove=None,
        y_remove=None,
        relabel_ids=None,
        y_relabel=None,
        X_relabel=None,
        y_relabel_old=None,
        sample_weight_add=None,
        reweight_ids=None,
        reweight_weight=None,
        X_reweight=None,
        y_reweight=None,
    ):
        """The validated plan of an update and the ledger slots it removes (empty when
        none); nothing is changed (the caller holds the model's lock)."""
        led = self._ledger
        # ---- validation: nothing is changed before this block has passed
        Xa = ta = None
        if X_add is not None or y_add is not None:
            if X_add is None or y_add is None:
                raise ValueError("adding samples needs both X and y")
            Xa = self._rows(X_add)
            ta = self._encode_y(y_add, what="y")
            if ta.shape[0] != Xa.shape[0]:
                raise ValueError(f"X has {Xa.shape[0]} rows but y has {ta.shape[0]} labels")
            wa = checked_weights(sample_weight_add, Xa.shape[0])
        elif sample_weight_add is not None:
            raise ValueError("sample_weight of added samples needs samples to add")
        else:
            wa = None
        rw_slots = rw = None
        if reweight_ids is not None or reweight_weight is not None:
            if reweight_ids is None or reweight_weight is None:
                raise ValueError("reweighting needs both the sample ids and their weights")
            rw_slots = led.slots_of(reweight_ids, "reweight ids")
            rw = checked_weights(reweight_weight, rw_slots.shape[0])
            rw = np.ones(rw_slots.shape[0]) if rw is None else rw
        rem_slots = rem_rows = rem_t = None
        if remove_ids is not None or X_remove is not None:
            rem_slots, rem_rows, rem_t = self._plan_remove(remove_ids, X_remove, y_remove)
        rel_slots = tl = rel_rows = rel_old = None
        if relabel_ids is not None:
            if y_relabel is None:
                raise ValueError("relabel needs the new labels y")
            rel_slots = led.slots_of(relabel_ids, "relabel ids")
            tl = self._encode_y(np.atleast_1d(np.asarray(y_relabel)), what="y")
            if tl.shape[0] != rel_slots.shape[0]:
                raise ValueError(f"{rel_slots.shape[0]} ids but {tl.shape[0]} labels to relabel")
            if not self._keeps_rows():
                rel_rows, rel_old = self._given_samples(
                    rel_slots, X_relabel, y_relabel_old, "relabel"
                )
            elif X_relabel is not None:  # not needed (the rows are kept), checked as predict
                self._rows(X_relabel)  # would check them
        rw_rows = rw_t = None
        if rw_slots is not None and self._keeps_rows() and X_reweight is not None:
            self._rows(X_reweight)  # not needed (the rows are kept), checked as predict would
        if rw_slots is not None and not self._keeps_rows():
            rw_rows, rw_t = self._given_samples(rw_slots, X_reweight, y_reweight, "reweight")
            if rel_slots is not None:  # the targets after this update's relabels
                rw_t = rw_t.copy()
                for j, slot in enumerate(rw_slots.tolist()):
                    hit = np.flatnonzero(rel_slots == slot)
                    if hit.size:
                        rw_t[j] = tl[hit[0]]
        plan = UpdatePlan(
            Xa,
            ta,
            rem_slots,
            rem_rows,
            rel_slots,
            tl,
            rel_rows,
            rem_t,
            rel_old,
            wa,
            rw_slots,
            rw,
            rw_rows,
            rw_t,
        )
        if not (plan.adds or plan.removes or plan.relabels or plan.reweights):
            raise ValueError("nothing to update: give samples to add, remove, relabel or reweight")
        if self._classifier and not led.keeps_labels:  # the touched samples' labels and
            plan = replace(plan, changed=self._samples_changed(plan))  # weights, as they are
        if not plan.removes:
            rem_slots = np.zeros(0, dtype=np.intp)
        if plan.relabels and np.intersect1d(rem_slots, plan.relabel_slots).size:
            raise ValueError("the same sample ids are both removed and relabelled")
        if plan.reweights and np.intersect1d(rem_slots, plan.reweight_slots).size:
            raise ValueError("the same sample ids are both removed and reweighted")
        self._check_outcome(plan, rem_slots)
        return plan, rem_slots

    def _keeps_rows(self):
        return self._ledger.keep_rows

    def _stored_samples(self, slots):
        """``(rows, targets)`` of the samples at ``slots`` from a store outside the ledger
        (the linear models' Dask row store), or None when the model has none."""
        return None

    def _given_samples(self, slots, X, y, verb):
        """The rows and current targets of the samples at ``slots`` of a model that keeps
        no rows (``keep_data=False``), as the caller gives them to ``verb`` them: the rows are
        required, the targets taken from ``y`` or recognised (both checked against the
        digests)."""
        if X is None:
            got = self._stored_samples(slots)  # rows kept elsewhere (a Dask row store)
            if got is not None:
                return got
            raise ValueError(
                "this model keeps no training rows (keep_data=False): pass the "
                f"samples' rows as X to {verb} them"
            )
        rows = self._rows(X)
        if rows.shape[0] != slots.shape[0]:
            raise ValueError(f"{slots.shape[0]} ids but {rows.shape[0]} rows in X")
        return rows, self._current_targets(slots, rows, y)

    def _current_targets(self, slots, rows, y):
        """The current encoded targets of the samples at ``slots`` of a model that keeps no
        labels, given their rows: ``y`` as given (checked against the digests), or recognised
        from the digests (classifiers)."""
        led = self._ledger
        if y is None:
            if not self._classifier:
                raise ValueError(
                    "this model keeps no targets (keep_data=False): pass the samples' current "
                    "targets (y of remove, y_old of relabel) with their rows"
                )
            return led.labels_of(slots, rows, self._label_candidates())
        t = self._encode_y(y, what="y")
        if t.shape[0] != slots.shape[0]:
            raise ValueError(f"{slots.shape[0]} ids but {t.shape[0]} labels in y")
        led.check_rows(slots, rows, t)
        return t

    def _label_candidates(self):
        """The encoded labels a sample may have: what recognises a classifier's label from its
        row and digest when the model keeps no labels (None for a regressor)."""
        if not self._classifier:
            return None
        K = self._n_classes
        return tuple(float(k) for k in range(K)) if K else (-1.0, 1.0)

    def _plan_remove(self, ids, X, y):
        """Slots, rows (as given, ``keep_data=False``) and current targets (``keep_data=False``:
        from the caller, checked against the digests; else None) of the samples to remove."""
        led = self._ledger
        rows = t = None
        if X is not None:
            rows = self._rows(X)
        if ids is not None:
            slots = led.slots_of(ids, "ids")
            if not self._keeps_rows():
                got = self._stored_samples(slots) if rows is None else None
                if got is not None:
                    rows, t = got
                elif rows is None:
                    raise ValueError(
                        "this model keeps no training rows (keep_data=False): pass the samples "
                        "to forget as remove(ids, X=...) or remove(X=..., y=...)"
                    )
                else:
                    if rows.shape[0] != slots.shape[0]:
                        raise ValueError(f"{slots.shape[0]} ids but {rows.shape[0]} rows in X")
                    t = self._current_targets(slots, rows, y)
        else:
            if self._keeps_rows():
                raise ValueError("this model keeps its training rows: remove samples by id")
            if y is None:
                raise ValueError("removing samples by value needs both X and y")
            t = self._encode_y(y, what="y")
            if t.shape[0] != rows.shape[0]:
                raise ValueError(f"X has {rows.shape[0]} rows but y has {t.shape[0]} labels")
            slots = led.find(rows, t)
        if led.keeps_labels:
            t = None
        return slots, rows, t

    def _samples_changed(self, plan):
        """``(before, after)`` of the samples ``plan`` touches, for a model that keeps no
        labels (their targets come with the plan): each a list of ``(targets, weights)``
        parts -- before: the removed, relabelled and reweighted samples as they are; after:
        the relabelled and reweighted ones as they will be, and the added ones.  Taken while
        validating (``plan.changed``), before the ledger changes."""
        if plan.changed is not None:
            return plan.changed
        led = self._ledger
        before, after = [], []
        if plan.removes:
            before.append((plan.remove_t, led.w[plan.remove_slots]))
        slots = [a for a in (plan.relabel_slots, plan.reweight_slots) if a is not None]
        if slots:
            S = np.unique(np.concatenate(slots))
            w0 = np.asarray(led.w[S], dtype=np.float64)
            t0, w1 = np.zeros(S.size), w0.copy()
            if plan.reweights:  # the targets after the relabels: those before, patched below
                j = np.searchsorted(S, plan.reweight_slots)
                t0[j], w1[j] = plan.reweight_t, plan.reweight_w
            t1 = t0.copy()
            if plan.relabels:
                j = np.searchsorted(S, plan.relabel_slots)
                t0[j], t1[j] = plan.relabel_t_old, plan.relabel_t
            before.append((t0, w0))
            after.append((t1, w1))
        if plan.adds:
            after.append(
                (plan.t_add, np.ones(plan.t_add.shape[0]) if plan.w_add is None else plan.w_add)
            )
        return before, after

    def _positives_after(self, plan):
        """Positive samples of positive weight after ``plan``, for a binary classifier that
        keeps no labels (it counts them instead, to refuse an update that would leave one
        class among the samples of positive weight, as fit refuses such weights)."""
        before, after = self._samples_changed(plan)

        def count(parts):
            return sum(
                int(np.count_nonzero((np.asarray(t) > 0) & (np.asarray(w) > 0))) for t, w in parts
            )

        return self._n_positive - count(before) + count(after)

    def _weights_change(self, plan):
        """Whether the weight rule must be checked on the weights: a weight other than 1 is in
        the model or comes with ``plan``, and ``plan`` may take positive weight away (a
        removal, a relabel, a reweight to 0).  Otherwise the rule holds after the update as
        before it, or every weight is 1 and the sample count settles it."""
        weighted = self._ledger.weighted or plan.reweights or plan.w_add is not None
        takes = (
            plan.removes or plan.relabels or (plan.reweights and bool(np.any(plan.reweight_w == 0)))
        )
        return bool(weighted and takes)

    def _weighted_after(self, plan, rem_slots):
        """``(live, w)``: the samples left by ``plan`` (a mask over the ledger's slots) and the
        weights they will have; the added samples' weights are in ``plan.w_add``."""
        led = self._ledger
        live = np.array(led.active, dtype=bool, copy=True)
        live[rem_slots] = False
        w = np.array(led.w.copy(), dtype=np.float64)
        if plan.reweights:
            w[plan.reweight_slots] = plan.reweight_w
        return live, w

    def _n_weighted_after(self, plan, rem_slots):
        """Samples of positive weight after ``plan``."""
        live, w = self._weighted_after(plan, rem_slots)
        n = int(np.count_nonzero(w[live] > 0))
        if plan.adds:
            n += (
                plan.X_add.shape[0] if plan.w_add is None else int(np.count_nonzero(plan.w_add > 0))
            )
        return n

    def _check_outcome(self, plan, rem_slots):
        """Refuse an update whose result ``fit`` would refuse: no sample left, or the weight
        rule of :meth:`_check_weight_rule` broken (no sample of positive weight; a classifier
        without declared classes left with one class among them)."""
        led = self._ledger
        n_after = led.n_samples - rem_slots.size + (plan.X_add.shape[0] if plan.adds else 0)
        if n_after < 1:
            raise ValueError("the update would remove every sample; a model needs at least one")
        shown = self._classifier and not self._classes_given
        if self._weights_change(plan):
            if not led.keeps_labels:
                n_w = self._n_weighted_after(plan, rem_slots)
                n_pos = self._positives_after(plan) if shown else None
                self._check_weight_rule(
                    n_w, None if n_pos is None else int(n_pos > 0) + int(n_pos < n_w), update=True
                )
                return
            live, w = self._weighted_after(plan, rem_slots)
            live &= w > 0
            t = led.y.copy()
            if plan.relabels:
                t[plan.relabel_slots] = plan.relabel_t
            labels = [t[live]]
            if plan.adds:
                labels.append(plan.t_add if plan.w_add is None else plan.t_add[plan.w_add > 0])
            labels = np.concatenate(labels)
            self._check_weight_rule(
                labels.shape[0], np.unique(labels).size if shown else None, update=True
            )
            return
        if shown:
            if not led.keeps_labels:
                n_pos = self._positives_after(plan)
                one_class = n_pos == 0 or n_pos == n_after
            else:
                keep = led.active.copy()
                keep[rem_slots] = False
                t = led.y.copy()
                if plan.relabels:
                    t[plan.relabel_slots] = plan.relabel_t
                labels = [t[keep]]
                if plan.adds:
                    labels.append(plan.t_add)
                labels = np.concatenate(labels)
                one_class = labels.size == 0 or np.all(labels == labels[0])
            if one_class:
                raise ValueError(
                    "the update would leave a single class in the training data; a classifier "
                    "needs two classes"
                )
