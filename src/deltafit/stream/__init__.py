"""Online learners and drift-aware stream learning (ARCHITECTURE.md, "Floors").

* :class:`Pegasos` — linear SVM, Shalev-Shwartz et al. (2011) Algorithm 1, last iterate;
* :class:`LSQSGD` — least squares by Nemirovski et al.'s (2009) robust stochastic approximation
  (averaged, projected SGD).

Both are the learners of Joulani et al. (2015) §5 and scikit-learn estimators with
``partial_fit``, river-style ``learn_one`` / ``predict_one``, ``snapshot`` / ``restore`` and a
cheap ``copy.copy``; their per-sample loops are compiled with numba when it is installed
(``pip install "deltafit[fast]"``), and :func:`deltafit.model_selection.treecv` runs its whole
recursion over them in compiled code.

Drift-aware learning (Sivan et al. §4.4): :class:`KDR` recomputes its batch model when the
incremental sphere says the window moved; the baselines :class:`SlidingWindow` (periodic),
:class:`DDM` (Gama et al.'s error-rate detector) and :class:`NORMA` (Kivinen et al.'s truncated
kernel SGD); :func:`prequential` evaluation; :func:`as_river` for river's own evaluation;
:func:`tradeoff_experiment` for the paper's Fig. 3.

More than two classes: the batch models are multiclass (one-vs-rest), so :class:`SlidingWindow`,
:class:`DDM` over them and :class:`KDR` (one incremental ball per class) take K classes;
the binary online learners get K classes through :class:`OneVsRest` (one learner per class).
"""

from deltafit.stream._ddm import DDM
from deltafit.stream._kdr import KDR
from deltafit.stream._lsqsgd import LSQSGD
from deltafit.stream._norma import NORMA, NORMARegressor
from deltafit.stream._ovr import OneVsRest
from deltafit.stream._pegasos import Pegasos
from deltafit.stream._prequential import StreamReport, prequential
from deltafit.stream._river import as_river
from deltafit.stream._tradeoff import tradeoff_experiment, tune_stream
from deltafit.stream._window import SlidingWindow

__all__ = [
    "Pegasos",
    "LSQSGD",
    "KDR",
    "SlidingWindow",
    "NORMA",
    "NORMARegressor",
    "DDM",
    "OneVsRest",
    "prequential",
    "StreamReport",
    "as_river",
    "tradeoff_experiment",
    "tune_stream",
]
