"""TF-IDF + truncated SVD embedding of weighted documents (scikit-learn style).

Documents carry weights (how many cases share each). Term document-frequencies count
cases, not distinct documents, and the SVD is fitted on rows scaled by the square root of
their weight, so the embedding is exactly that of the full, repeated corpus while costing
only the distinct documents. Above ``fit_max`` distinct documents the SVD is fitted on a
seeded sample drawn in proportion to weight, then applied to every document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["TOKEN_PATTERN", "WeightedLSA"]

TOKEN_PATTERN = r"(?u)\b[^\W\d_][\w]+\b"
"""Words of two or more characters that start with a letter (numbers are left out)."""


class WeightedLSA:
    """Latent semantic analysis of weighted documents: TF-IDF, then truncated SVD.

    Args:
        n_components: The largest embedding dimension (capped by the data).
        fit_max: Fit the SVD on at most this many distinct documents.
        max_features: The largest vocabulary (most frequent terms, counted over cases).
        seed: Seeds the randomized SVD and the fitting sample.

    Attributes:
        vocabulary_: The terms, in column order (after ``fit``).
        idf_: The inverse document frequency of each term.
        components_: The SVD components, ``(n_components_, n_terms)``.
        n_components_: The dimension actually used.
        n_fit_documents_: How many distinct documents the SVD was fitted on.
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

    def fit_transform_tfidf(self, texts: Sequence[str], weights: Sequence[int]) -> Any:
        """Learn the vocabulary and IDF, and return the L2-normalised TF-IDF matrix."""
        import scipy.sparse as sp
        from sklearn.feature_extraction.text import CountVectorizer

        counts = CountVectorizer(
            token_pattern=TOKEN_PATTERN, stop_words="english", dtype=np.float64
        ).fit(texts)
        matrix = counts.transform(texts).tocsr()
        w = np.asarray(weights, dtype=np.float64)
        term_freq = np.asarray(matrix.T @ w).ravel()
        names = np.asarray(counts.get_feature_names_out())
        if term_freq.size > self.max_features:
            keep = np.sort(np.lexsort((names, -term_freq))[: self.max_features])
            matrix, names = matrix[:, keep], names[keep]
        self.vocabulary_ = [str(t) for t in names]
        presence = matrix.copy()
        presence.data[:] = 1.0
        doc_freq = np.asarray(presence.T @ w).ravel()
        n = w.sum()
        self.idf_ = np.log((1.0 + n) / (1.0 + doc_freq)) + 1.0
        matrix.data = 1.0 + np.log(matrix.data)  # sublinear term frequency
        tfidf = matrix @ sp.diags(self.idf_)
        return _l2_rows(sp.csr_matrix(tfidf))

    def fit_svd(
        self, tfidf: Any, weights: Sequence[int], n_components: int | None = None
    ) -> NDArray[np.float64]:
        """Fit a truncated SVD on the weighted rows and return the components."""
        import scipy.sparse as sp
        from sklearn.decomposition import TruncatedSVD

        w = np.asarray(weights, dtype=np.float64)
        rows = np.arange(tfidf.shape[0])
        if rows.size > self.fit_max:
            rng = np.random.default_rng(self.seed)
            rows = np.sort(rng.choice(rows.size, size=self.fit_max, replace=False, p=w / w.sum()))
            scale = np.ones(rows.size)
        else:
            scale = np.sqrt(w)
        self.n_fit_documents_ = int(rows.size)
        fit_matrix = sp.diags(scale) @ tfidf[rows]
        wanted = n_components or self.n_components
        k = min(wanted, fit_matrix.shape[1] - 1, fit_matrix.shape[0] - 1)
        if k < 1:
            return np.eye(1, tfidf.shape[1])
        svd = TruncatedSVD(n_components=k, algorithm="randomized", n_iter=7, random_state=self.seed)
        svd.fit(fit_matrix)
        components: NDArray[np.float64] = svd.components_
        return components

    def fit_transform(
        self, texts: Sequence[str], weights: Sequence[int]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], Any]:
        """Embed the documents.

        Returns:
            ``(embedding, projection, tfidf)``: the L2-normalised embedding used for
            clustering, the separate 2-D projection for display, and the TF-IDF matrix.
        """
        tfidf = self.fit_transform_tfidf(texts, weights)
        self.components_ = self.fit_svd(tfidf, weights)
        self.n_components_ = int(self.components_.shape[0])
        embedding = _l2_dense(np.asarray(tfidf @ self.components_.T))
        plane = self.fit_svd(tfidf, weights, n_components=2)
        projection = np.asarray(tfidf @ plane.T)
        if projection.shape[1] < 2:
            projection = np.hstack(
                [projection, np.zeros((projection.shape[0], 2 - projection.shape[1]))]
            )
        return embedding, projection, tfidf

    def describe(self) -> dict[str, Any]:
        """The embedding's parameters, for the report."""
        return {
            "method": "tfidf+truncated_svd",
            "dimensions": self.n_components_,
            "vocabulary": len(self.vocabulary_),
            "fit_documents": self.n_fit_documents_,
            "tfidf": "sublinear tf, smoothed idf over cases, l2 rows, English stop words",
            "projection": "separate 2-component truncated SVD of the same TF-IDF",
        }


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
