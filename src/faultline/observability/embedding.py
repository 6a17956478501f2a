"""TF-IDF + truncated SVD embedding of cases as (probe document, verdict document) pairs.

Each kind of document is turned into TF-IDF vectors on its own (document frequencies count
cases, not distinct documents), and a case's vector is the two blocks side by side, each
L2-normalised and scaled by 1/√2 so the whole has unit length. The truncated SVD is fitted
on the distinct pairs with rows scaled by the square root of how many cases share them,
which is exactly the SVD of the full, repeated corpus; above ``fit_max`` distinct pairs it
is fitted on a seeded sample drawn in proportion to weight. Because a pair's vector is the
sum of its two blocks, its embedding is the sum of the two blocks' projections: computed
once per distinct probe and once per distinct verdict, then added per pair — on demand, a
block of pairs at a time (:class:`PairPoints`), so millions of pairs never need a dense
pairs × dimensions matrix.

The class follows scikit-learn's conventions: the constructor stores parameters, fitted
attributes end in ``_``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.observability.documents import CaseDocuments

__all__ = ["TOKEN_PATTERN", "CaseEmbedding", "PairPoints"]

TOKEN_PATTERN = r"(?u)\b[^\W\d_][\w]+\b"
"""Words of two or more characters that start with a letter (numbers are left out)."""

_HALF = 1.0 / math.sqrt(2.0)
_RANK_TOL = 1e-10
"""Singular values below this fraction of the largest are numerical noise (rank deficiency)."""


class PairPoints:
    """The L2-normalised embedding of each distinct pair, computed for the rows asked for.

    A pair's point is the sum of its probe's and its verdict's projections, scaled by
    1/√2 and normalised: row by row, so any block of rows is the same, bit for bit, as
    those rows of the whole matrix.

    Args:
        probe_part: Each probe document's projection.
        verdict_part: Each verdict document's projection.
        pair_probe: Each pair's probe document.
        pair_verdict: Each pair's verdict document.
    """

    def __init__(
        self,
        probe_part: NDArray[np.float64],
        verdict_part: NDArray[np.float64],
        pair_probe: NDArray[np.int64],
        pair_verdict: NDArray[np.int64],
    ) -> None:
        self._probe = probe_part
        self._verdict = verdict_part
        self._pair_probe = pair_probe
        self._pair_verdict = pair_verdict

    def __len__(self) -> int:
        return int(self._pair_probe.size)

    def take(self, rows: NDArray[np.int64] | slice) -> NDArray[np.float64]:
        """The points of ``rows`` (indices or a slice), one row each."""
        summed = self._probe[self._pair_probe[rows]] + self._verdict[self._pair_verdict[rows]]
        return _l2_dense(summed * _HALF)


class CaseEmbedding:
    """Latent semantic analysis of cases described by a probe and a verdict document.

    Args:
        n_components: The largest embedding dimension (capped by the data).
        fit_max: Fit the SVD on at most this many distinct (probe, verdict) pairs.
        max_features: The largest vocabulary of each kind of document.
        seed: Seeds the randomized SVD and the fitting sample.

    Attributes:
        vocabulary_: The probe terms, then the verdict terms, in column order.
        n_probe_terms_: How many columns the probe block has.
        n_components_: The dimension actually used.
        n_fit_pairs_: How many distinct pairs the SVD was fitted on.
    """

    def __init__(
        self,
        n_components: int = 64,
        fit_max: int = 20_000,
        max_features: int = 20_000,
        seed: int = 0,
    ) -> None:
        self.n_components = n_components
        self.fit_max = fit_max
        self.max_features = max_features
        self.seed = seed

    def fit_transform(self, docs: CaseDocuments) -> tuple[PairPoints, NDArray[np.float64]]:
        """Embed every distinct pair.

        Returns:
            ``(points, projection)``: the L2-normalised embedding used for clustering (rows
            computed when asked for), and the separate 2-D projection for display, one row
            per pair.
        """
        w = docs.pair_weight
        probe_w = docs.weights_of(docs.pair_probe, len(docs.probe_texts))
        verdict_w = docs.weights_of(docs.pair_verdict, len(docs.verdict_texts))
        self.probe_tfidf_, probe_terms = self._tfidf(docs.probe_texts, probe_w)
        self.verdict_tfidf_, verdict_terms = self._tfidf(docs.verdict_texts, verdict_w)
        self.vocabulary_ = probe_terms + verdict_terms
        self.n_probe_terms_ = len(probe_terms)
        rows = self._fit_rows(w)
        self.n_fit_pairs_ = int(rows.size)
        fit_matrix = self._pair_matrix(
            docs, rows, scale=np.sqrt(w[rows]) if rows.size == w.size else None
        )
        components = self._svd(fit_matrix, self.n_components)
        self.n_components_ = int(components.shape[0])
        split = self.n_probe_terms_
        embedding = PairPoints(
            np.asarray(self.probe_tfidf_ @ components[:, :split].T),
            np.asarray(self.verdict_tfidf_ @ components[:, split:].T),
            docs.pair_probe,
            docs.pair_verdict,
        )
        plane = self._svd(fit_matrix, 2)
        projection = self._project(docs, plane)
        if projection.shape[1] < 2:
            projection = np.hstack(
                [projection, np.zeros((projection.shape[0], 2 - projection.shape[1]))]
            )
        return embedding, projection

    def centroid_terms(
        self, docs: CaseDocuments, pairs: NDArray[np.int64], top: int
    ) -> tuple[list[str], list[str]]:
        """The heaviest terms of the weighted mean vector of ``pairs``: ``top`` of each block.

        Returns:
            ``(probe_terms, verdict_terms)``: what the cases were asked, and what happened.
        """
        w = docs.pair_weight[pairs]
        probe_mass = np.bincount(docs.pair_probe[pairs], weights=w, minlength=len(docs.probe_texts))
        verdict_mass = np.bincount(
            docs.pair_verdict[pairs], weights=w, minlength=len(docs.verdict_texts)
        )
        split = self.n_probe_terms_
        return (
            _heaviest(
                np.asarray(self.probe_tfidf_.T @ probe_mass).ravel(), self.vocabulary_[:split], top
            ),
            _heaviest(
                np.asarray(self.verdict_tfidf_.T @ verdict_mass).ravel(),
                self.vocabulary_[split:],
                top,
            ),
        )

    def describe(self) -> dict[str, Any]:
        """The embedding's parameters, for the report."""
        return {
            "method": "tfidf+truncated_svd",
            "dimensions": self.n_components_,
            "documents": "probe (category, severity, expectation, task, input) + verdict (outcome, "
            "risk band, rules, failure modes, explanation), each TF-IDF'd and weighted 1/sqrt(2)",
            "vocabulary": len(self.vocabulary_),
            "fit_pairs": self.n_fit_pairs_,
            "tfidf": "sublinear tf, smoothed idf over cases, l2 rows, English stop words",
            "projection": "separate 2-component truncated SVD of the same vectors",
        }

    # ---------------------------------------------------------------------------- steps

    def _tfidf(self, texts: Sequence[str], weights: NDArray[np.float64]) -> tuple[Any, list[str]]:
        import scipy.sparse as sp
        from sklearn.feature_extraction.text import CountVectorizer

        try:
            matrix = CountVectorizer(
                token_pattern=TOKEN_PATTERN, stop_words="english", dtype=np.float64
            )
            counts = matrix.fit_transform(texts).tocsr()
        except ValueError:  # no term at all (every word a stop word)
            return sp.csr_matrix((len(texts), 0)), []
        names = np.asarray(matrix.get_feature_names_out())
        term_freq = np.asarray(counts.T @ weights).ravel()
        if term_freq.size > self.max_features:
            keep = np.sort(np.lexsort((names, -term_freq))[: self.max_features])
            counts, names = counts[:, keep], names[keep]
        presence = counts.copy()
        presence.data[:] = 1.0
        doc_freq = np.asarray(presence.T @ weights).ravel()
        idf = np.log((1.0 + weights.sum()) / (1.0 + doc_freq)) + 1.0
        counts.data = 1.0 + np.log(counts.data)  # sublinear term frequency
        return _l2_rows(sp.csr_matrix(counts @ sp.diags(idf))), [str(t) for t in names]

    def _fit_rows(self, w: NDArray[np.float64]) -> NDArray[np.int64]:
        if w.size <= self.fit_max:
            return np.arange(w.size)
        rng = np.random.default_rng(self.seed)
        return np.sort(rng.choice(w.size, size=self.fit_max, replace=False, p=w / w.sum()))

    def _pair_matrix(
        self, docs: CaseDocuments, rows: NDArray[np.int64], scale: NDArray[np.float64] | None
    ) -> Any:
        import scipy.sparse as sp

        blocks = sp.hstack(
            [self.probe_tfidf_[docs.pair_probe[rows]], self.verdict_tfidf_[docs.pair_verdict[rows]]]
        )
        factor = np.full(rows.size, _HALF) if scale is None else scale * _HALF
        return sp.csr_matrix(sp.diags(factor) @ blocks)

    def _svd(self, matrix: Any, wanted: int) -> NDArray[np.float64]:
        """At most ``wanted`` right singular vectors of ``matrix``, as many as its rank.

        ``min(rows, columns)`` components span every row, so distinct rows stay distinct
        (two rows keep two dimensions); components whose singular value is numerically zero
        are left out, so rows that are all the same give one dimension, not noise.
        """
        from sklearn.decomposition import TruncatedSVD

        if min(matrix.shape) < 2:
            return np.eye(1, matrix.shape[1])
        k = min(wanted, *matrix.shape)
        svd = TruncatedSVD(n_components=k, algorithm="randomized", n_iter=7, random_state=self.seed)
        with np.errstate(divide="ignore", invalid="ignore"):  # explained_variance_ratio_ of a
            svd.fit(matrix)  # matrix with no variance (every row the same) is 0/0; unused here
        singular: NDArray[np.float64] = svd.singular_values_
        rank = max(1, int(np.count_nonzero(singular > singular[0] * _RANK_TOL)))
        components: NDArray[np.float64] = svd.components_[:rank]
        return components

    def _project(self, docs: CaseDocuments, components: NDArray[np.float64]) -> NDArray[np.float64]:
        split = self.n_probe_terms_
        probe_part = np.asarray(self.probe_tfidf_ @ components[:, :split].T)
        verdict_part = np.asarray(self.verdict_tfidf_ @ components[:, split:].T)
        out: NDArray[np.float64] = (
            probe_part[docs.pair_probe] + verdict_part[docs.pair_verdict]
        ) * _HALF
        return out


_LABEL_TOKENS = ("category_", "severity_", "expect_", "outcome_", "risk_")
"""Tokens that restate a case's labels: they shape the embedding but say nothing new as terms."""


def _heaviest(weights: NDArray[np.float64], names: Sequence[str], top: int) -> list[str]:
    order = np.lexsort((np.asarray(names, dtype=object), -weights))
    terms = (names[i] for i in order if weights[i] > 0 and not names[i].startswith(_LABEL_TOKENS))
    return [t for _, t in zip(range(top), terms, strict=False)]


def _l2_rows(matrix: Any) -> Any:
    import scipy.sparse as sp

    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ matrix)


def _l2_dense(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: NDArray[np.float64] = matrix / norms
    return out
