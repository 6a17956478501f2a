"""Observability: the failure geometry of a run (embedding, clustering, mutual information).

Cases become text documents, documents a TF-IDF + truncated-SVD embedding, the embedding
KMeans clusters; mutual information then says whether the clusters follow category,
severity or outcome. Everything is seeded and single-threaded, so the same cases give the
same geometry to the last bit. Components follow scikit-learn's conventions: constructors
store parameters, fitted attributes end in ``_``.
"""

from __future__ import annotations

from faultline.observability.documents import (
    CaseDocuments,
    VerdictTable,
    pair_documents,
    probe_document,
)
from faultline.observability.geometry import (
    DEFAULT_MIN_CASES,
    Geometry,
    compute_observability,
    geometry_of,
    mutual_information,
)

__all__ = [
    "DEFAULT_MIN_CASES",
    "CaseDocuments",
    "Geometry",
    "VerdictTable",
    "compute_observability",
    "geometry_of",
    "mutual_information",
    "pair_documents",
    "probe_document",
]
