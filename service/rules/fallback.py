"""The learned fallback: what no rule matched, decided by a model trained at rule-load time.

A linear classifier (scikit-learn, logistic loss) over character n-grams of the
message, type and code names, plus a few shape tokens (status family, a tool was named,
the provider's kind, the payload's shape). It learns from the labelled examples of the
`examples/` table and from every rule's own test cases, so an operator who adds a rule
with a test teaches it too. It answers a class and reason with a probability; below the
ruleset's minimum confidence, or when it says `unknown`, the report stays unknown.

Pure once trained: `predict` reads no clock, settings or metrics. scikit-learn is imported
only when a fallback is trained, so `errtriage check` and a fallback switched off never
pay for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy
from numpy.typing import NDArray

from service.models import ErrorReport
from service.normalize import NormalizedError

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

UNKNOWN_CLASS = "unknown"
TEXT_CAP = 2000  # the head of a message says what failed; a long stack trace only adds noise
_STRONGEST = 6
_NEAREST = 3
_MIN_EXAMPLES = 20


@dataclass(frozen=True, slots=True)
class LabelledReport:
    """A report and its right answer, as read from the examples/ table or a rule's test."""

    report: ErrorReport
    class_: str
    reason: str
    origin: str  # file#index, or the rule whose test it is


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled report, normalized: what the fallback learns from."""

    error: NormalizedError
    provider_kind: str | None
    class_: str
    reason: str
    origin: str  # the examples file or rule it came from (shown in explain)


@dataclass(frozen=True, slots=True)
class Guess:
    class_: str
    reason: str
    confidence: float
    leaned_on: dict[str, Any]


def text_of(error: NormalizedError) -> str:
    """The words the n-grams read: exception types and codes first (they say most), then the message."""
    return " ".join((*error.types, *error.codes, error.message[:TEXT_CAP])).lower()


def tokens_of(error: NormalizedError, provider_kind: str | None) -> str:
    """The payload's shape, as words no message contains."""
    tokens = [f"shape_{error.shape}", f"kind_{provider_kind or 'none'}", "tool_yes" if error.tool else "tool_no"]
    if error.status is not None:
        tokens += [f"status_{error.status}", f"status_{error.status // 100}xx"]
    return " ".join(tokens)


class Fallback:
    """A trained model, with what explain needs (feature names, the training rows).

    Training and explain use scikit-learn; `predict` reads the fitted parameters directly
    (the vectorizers' own analyzers, vocabularies and idf, the model's weights): sklearn's
    per-call validation cost ~5 ms a report, this ~0.2 ms, and a test holds both equal."""

    def __init__(self, examples: list[Example], min_confidence: float) -> None:
        from scipy.sparse import hstack
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import SGDClassifier

        self.min_confidence = min_confidence
        self._hstack = hstack
        self._chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, min_df=2,
                                      max_features=60_000, dtype=numpy.float32)
        self._words = TfidfVectorizer(analyzer="word", token_pattern=r"\S+", dtype=numpy.float32)
        rows = self._rows([text_of(e.error) for e in examples], [tokens_of(e.error, e.provider_kind) for e in examples],
                          fit=True)
        labels = [f"{e.class_}/{e.reason}" for e in examples]
        # Logistic loss (so it has probabilities) by SGD: on 5-fold grouped CV of the tuning part it
        # matched lbfgs's accuracy (0.82 vs 0.80 at 0.5) in a fraction of the fit time.
        self._model = SGDClassifier(loss="log_loss", alpha=2e-5, max_iter=30, tol=None, random_state=0)
        self._model.fit(rows, labels)
        self._labels: list[str] = list(self._model.classes_)
        self._class_of = [label.split("/", 1)[0] for label in self._labels]
        self._names = [*(f"'{n}'" for n in self._chars.get_feature_names_out()), *self._words.get_feature_names_out()]
        self._train_rows = rows
        self._train = [(e.origin, labels[i], e.error.message[:160]) for i, e in enumerate(examples)]
        self._blocks = (_Block(self._chars, 0), _Block(self._words, len(self._chars.vocabulary_)))
        self._weights = numpy.ascontiguousarray(self._model.coef_.T, dtype=numpy.float64)  # features x labels
        self._intercept: NDArray[numpy.float64] = self._model.intercept_.astype(numpy.float64)

    def _rows(self, texts: list[str], tokens: list[str], fit: bool = False) -> csr_matrix:
        if fit:
            blocks = [self._chars.fit_transform(texts), self._words.fit_transform(tokens)]
        else:
            blocks = [self._chars.transform(texts), self._words.transform(tokens)]
        rows: csr_matrix = self._hstack(blocks).tocsr()  # sklearn's matrices are untyped
        return rows

    @property
    def labels(self) -> list[str]:
        """The "class/reason" labels, in the order `probabilities` answers them."""
        return self._labels

    def probabilities(self, error: NormalizedError, provider_kind: str | None) -> NDArray[numpy.float64]:
        """Each label's probability, as sklearn's predict_proba gives it (one-vs-rest sigmoids, normalized)."""
        columns: list[int] = []
        values: list[float] = []
        for block, text in zip(self._blocks, (text_of(error), tokens_of(error, provider_kind)), strict=True):
            block.vector(text, columns, values)
        decision = self._intercept + numpy.asarray(values) @ self._weights[columns] if columns else self._intercept
        sigmoid = 1.0 / (1.0 + numpy.exp(-decision))
        return sigmoid / float(sigmoid.sum())

    def predict(self, error: NormalizedError, provider_kind: str | None, explain: bool = False) -> Guess | None:
        """The most probable class (its reasons' probabilities summed) and its likeliest reason,
        or None when that is `unknown` or below the minimum confidence."""
        probabilities = self.probabilities(error, provider_kind)
        by_class: dict[str, float] = {}
        for class_id, p in zip(self._class_of, probabilities, strict=True):
            by_class[class_id] = by_class.get(class_id, 0.0) + float(p)
        class_id = max(by_class, key=by_class.__getitem__)
        confidence = by_class[class_id]
        if class_id == UNKNOWN_CLASS or confidence < self.min_confidence:
            return None
        best = max((i for i, c in enumerate(self._class_of) if c == class_id), key=lambda i: probabilities[i])
        reason = self._labels[best].split("/", 1)[1]
        leaned_on = self._leaned_on(self._rows([text_of(error)], [tokens_of(error, provider_kind)]), best) \
            if explain else {}
        return Guess(class_id, reason, round(confidence, 4), leaned_on)

    def _leaned_on(self, row: csr_matrix, label: int) -> dict[str, Any]:
        """The strongest features for the chosen label, and the nearest labelled examples."""
        weights = self._model.coef_[label]
        contributions = sorted(((float(row.data[k] * weights[j]), int(j)) for k, j in enumerate(row.indices)),
                               reverse=True)[:_STRONGEST]
        similarity: NDArray[numpy.float64] = (self._train_rows @ row.T).toarray().ravel()
        nearest = similarity.argsort()[::-1][:_NEAREST]
        return {
            "model": "linear classifier (logistic loss) over character n-grams and shape tokens",
            "strongest_features": [{"feature": self._names[j], "weight": round(w, 3)}
                                   for w, j in contributions if w > 0],
            "nearest_examples": [{"from": self._train[i][0], "label": self._train[i][1], "message": self._train[i][2],
                                  "similarity": round(float(similarity[i]), 3)} for i in nearest],
        }

    def sklearn_probabilities(self, error: NormalizedError, provider_kind: str | None) -> NDArray[numpy.float64]:
        """The same through scikit-learn's own transform and predict_proba (what tests compare with)."""
        probabilities: NDArray[numpy.float64] = self._model.predict_proba(
            self._rows([text_of(error)], [tokens_of(error, provider_kind)]))
        return probabilities[0, :]

class _Block:
    """One fitted vectorizer's transform for one text, without sklearn's per-call checks."""

    def __init__(self, vectorizer: Any, offset: int) -> None:
        self._analyze = vectorizer.build_analyzer()
        self._vocabulary: dict[str, int] = vectorizer.vocabulary_
        self._idf = vectorizer.idf_
        self._sublinear = vectorizer.sublinear_tf
        self._offset = offset

    def vector(self, text: str, columns: list[int], values: list[float]) -> None:
        """Append this block's tf-idf entries (L2-normalized within the block, as TfidfVectorizer does)."""
        counts: dict[int, int] = {}
        for gram in self._analyze(text):
            column = self._vocabulary.get(gram)
            if column is not None:
                counts[column] = counts.get(column, 0) + 1
        if not counts:
            return
        weights = [((1.0 + math.log(n)) if self._sublinear else float(n)) * self._idf[c] for c, n in counts.items()]
        norm = math.sqrt(sum(w * w for w in weights))
        columns.extend(c + self._offset for c in counts)
        values.extend(w / norm for w in weights)


def train(examples: Iterable[Example], min_confidence: float) -> Fallback | None:
    """A trained fallback, or None when there is too little to learn from (fewer than 20
    examples, or a single label)."""
    examples = list(examples)
    if len(examples) < _MIN_EXAMPLES or len({(e.class_, e.reason) for e in examples}) < 2:
        return None
    return Fallback(examples, min_confidence)
