"""The learned fallback: what no rule matched, decided by a model trained at rule-load time.

A linear classifier (scikit-learn, logistic loss) over character n-grams of the
message, type and code names, plus a few shape tokens (status family, a tool was named,
the provider's kind, the payload's shape). It learns from the labelled examples of the
`examples/` table and from every rule's own test cases, so an operator who adds a rule
with a test teaches it too. It answers a class and reason with a probability; below the
ruleset's minimum confidence, or when it says `unknown`, the report stays unknown.

Pure once trained: `predict` reads no clock, settings or metrics. scikit-learn is imported
only where a fallback is fitted or built (its analyzers), so `errtriage check` and a
fallback switched off never pay for it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy
from numpy.typing import NDArray

from service.normalize import NormalizedError
from service.rules.labelled import Example, Guess

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

UNKNOWN_CLASS = "unknown"
# The head of a message says what failed; a long stack trace only adds noise, and every
# character costs three n-gram lookups on the unknown path. 500 and 2,000 scored the same in
# grouped cross-validation on the tuning part (class 92.8%, real errors recovered 122 vs 121 of 292).
TEXT_CAP = 500
WORD_MEMO_SIZE = 50_000  # words whose known n-gram columns are kept (~10 MB at most)
_STRONGEST = 6
_NEAREST = 3
_MIN_EXAMPLES = 20
# A hard negative (an `unknown/*` example) counts twice in the fit, and the penalty is half the
# previous 2e-5: with the threshold at 0.65, 5-fold CV grouped by origin on the
# tuning part (6 shuffles; the reports no rule matched) recovered as many real errors as the
# previous model at 0.6 (39.4% vs 39.3%) and pulled fewer negatives out of unknown (2.9% vs 3.3%).
# Word n-grams, balanced class weights, class-only labels, other char ranges, min_df,
# max_features and the text cap moved along the same recall/negatives curve, none above it.
# The threshold (ERRTRIAGE_FALLBACK_MIN_CONFIDENCE, 0.65) is the lowest that keeps 90% of hard
# negatives unknown on errors the rules had not seen: bench/prequential.py scores each
# collection's tuning share with the tables from before it (1,580 cases, 2026-12-02: class 73.8%
# and negatives 91.0% at 0.65, 71.9% and 93.9% at 0.8, 74.0% and 89.4% at 0.6). The grouped CV
# above chose 0.8, but there the rules had been written from every fold, so what reached the
# fallback was mostly negatives. On that prequential set alpha, the negatives' weight, examples
# alone, a two-stage model (error or not, then which) and nearest neighbours all moved along
# the same class/negatives curve.
_NEGATIVE_WEIGHT = 2.0
_ALPHA = 1e-5


def text_of(error: NormalizedError) -> str:
    """The words the n-grams read: exception types and codes first (they say most), then the message."""
    return " ".join((*error.types, *error.codes, error.message[:TEXT_CAP])).lower()


def tokens_of(error: NormalizedError, provider_kind: str | None) -> str:
    """The payload's shape, as words no message contains."""
    tokens = [f"shape_{error.shape}", f"kind_{provider_kind or 'none'}", "tool_yes" if error.tool else "tool_no"]
    if error.status is not None:
        tokens += [f"status_{error.status}", f"status_{error.status // 100}xx"]
    return " ".join(tokens)


_Columns = NDArray[numpy.intp]
_Values = NDArray[numpy.float64]
_NO_COLUMNS: _Columns = numpy.zeros(0, dtype=numpy.intp)
_NO_VALUES: _Values = numpy.zeros(0, dtype=numpy.float64)
_CHAR_GRAMS = {"analyzer": "char_wb", "ngram_range": (3, 5)}
_WORDS = {"analyzer": "word", "token_pattern": r"\S+"}


@dataclass(frozen=True, slots=True)
class Fitted:
    """What training produces, as plain arrays and lists: cheap to send from the training
    process, and all `Fallback` needs (sklearn's fitted objects stay where they were fitted)."""

    labels: list[str]  # "class/reason", in the weights' column order
    char_terms: list[str]  # the character n-grams, in column order
    char_idf: NDArray[numpy.float64]
    word_terms: list[str]  # the shape tokens, in column order (after the n-grams)
    word_idf: NDArray[numpy.float64]
    weights: NDArray[numpy.float64]  # features x labels
    intercept: NDArray[numpy.float64]
    train_rows: csr_matrix  # the training rows, for the nearest examples in explain
    train: list[tuple[str, str, str]]  # each training row's origin, label and message head


@dataclass(frozen=True, slots=True)
class SklearnFit:
    """The fitted scikit-learn objects (kept only where they were fitted: tests compare with them)."""

    chars: Any
    words: Any
    model: Any
    train_rows: csr_matrix  # the training set, transformed

    def rows(self, texts: list[str], tokens: list[str]) -> csr_matrix:
        from scipy.sparse import hstack

        rows: csr_matrix = hstack([self.chars.transform(texts), self.words.transform(tokens)]).tocsr()
        return rows  # sklearn's matrices are untyped


def fit_sklearn(examples: list[Example]) -> SklearnFit:
    """The vectorizers and the classifier fitted on `examples`."""
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import SGDClassifier

    chars = TfidfVectorizer(**_CHAR_GRAMS, sublinear_tf=True, min_df=2, max_features=60_000,
                            dtype=numpy.float32)
    words = TfidfVectorizer(**_WORDS, dtype=numpy.float32)
    rows = hstack([chars.fit_transform([text_of(e.error) for e in examples]),
                   words.fit_transform([tokens_of(e.error, e.provider_kind) for e in examples])]).tocsr()
    # Logistic loss (so it has probabilities) by SGD: on 5-fold grouped CV of the tuning part it
    # matched lbfgs's accuracy (0.82 vs 0.80 at 0.5) in a fraction of the fit time.
    model = SGDClassifier(loss="log_loss", alpha=_ALPHA, max_iter=30, tol=None, random_state=0)
    weights = [_NEGATIVE_WEIGHT if e.class_ == UNKNOWN_CLASS else 1.0 for e in examples]
    model.fit(rows, [_label(e) for e in examples], sample_weight=weights)
    return SklearnFit(chars, words, model, rows)


def _label(example: Example) -> str:
    return f"{example.class_}/{example.reason}"


def fitted_from(fit: SklearnFit, examples: list[Example]) -> Fitted:
    def terms(vectorizer: Any) -> list[str]:
        ordered = [""] * len(vectorizer.vocabulary_)
        for term, column in vectorizer.vocabulary_.items():
            ordered[column] = term
        return ordered

    return Fitted(
        labels=list(fit.model.classes_),
        char_terms=terms(fit.chars), char_idf=fit.chars.idf_.astype(numpy.float64),
        word_terms=terms(fit.words), word_idf=fit.words.idf_.astype(numpy.float64),
        weights=numpy.ascontiguousarray(fit.model.coef_.T, dtype=numpy.float64),
        intercept=fit.model.intercept_.astype(numpy.float64),
        train_rows=fit.train_rows,
        train=[(e.origin, _label(e), e.error.message[:160]) for e in examples],
    )


def fit(examples: list[Example]) -> Fitted:
    """Fit on `examples` (scikit-learn; seconds on the shipped tables)."""
    return fitted_from(fit_sklearn(examples), examples)


class Fallback:
    """A trained model: the fitted parameters, read directly.

    `predict` computes what sklearn's transform and predict_proba would (sklearn's per-call
    validation cost ~5 ms a report, this ~0.2 ms; a test holds both equal). Building one from
    a `Fitted` runs Python loops only, no long call that would hold the GIL: the serving
    process does it while it serves (see training_process.py)."""

    def __init__(self, fitted: Fitted, min_confidence: float) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer  # analyzers need no fitted state

        self.min_confidence = min_confidence
        self._fitted = fitted
        self._labels = fitted.labels
        self._class_of = [label.split("/", 1)[0] for label in self._labels]
        self._blocks = (_Block(TfidfVectorizer(**_CHAR_GRAMS).build_analyzer(), fitted.char_terms,
                               fitted.char_idf, sublinear=True, offset=0, per_word=True),
                        _Block(TfidfVectorizer(**_WORDS).build_analyzer(), fitted.word_terms,
                               fitted.word_idf, sublinear=False, offset=len(fitted.char_terms)))

    @property
    def labels(self) -> list[str]:
        """The "class/reason" labels, in the order `probabilities` answers them."""
        return self._labels

    def _vector(self, error: NormalizedError, provider_kind: str | None) -> tuple[_Columns, _Values]:
        """The report's tf-idf row: its columns and their values, both blocks, as arrays."""
        texts = (text_of(error), tokens_of(error, provider_kind))
        parts = [block.vector(text) for block, text in zip(self._blocks, texts, strict=True)]
        return numpy.concatenate([columns for columns, _ in parts]), numpy.concatenate([values for _, values in parts])

    def probabilities(self, error: NormalizedError, provider_kind: str | None) -> NDArray[numpy.float64]:
        """Each label's probability, as sklearn's predict_proba gives it (one-vs-rest sigmoids, normalized)."""
        return self._probabilities(*self._vector(error, provider_kind))

    def _probabilities(self, columns: _Columns, values: _Values) -> NDArray[numpy.float64]:
        fitted = self._fitted
        decision = fitted.intercept + values @ fitted.weights[columns] if len(columns) else fitted.intercept
        sigmoid: NDArray[numpy.float64] = 1.0 / (1.0 + numpy.exp(-decision))
        normalized: NDArray[numpy.float64] = sigmoid / sigmoid.sum()
        return normalized

    def predict(self, error: NormalizedError, provider_kind: str | None, explain: bool = False) -> Guess | None:
        """The most probable class (its reasons' probabilities summed) and its likeliest reason,
        or None when that is `unknown` or below the minimum confidence."""
        columns, values = self._vector(error, provider_kind)
        probabilities = self._probabilities(columns, values)
        by_class: dict[str, float] = {}
        for class_id, p in zip(self._class_of, probabilities, strict=True):
            by_class[class_id] = by_class.get(class_id, 0.0) + float(p)
        class_id = max(by_class, key=by_class.__getitem__)
        confidence = by_class[class_id]
        if class_id == UNKNOWN_CLASS or confidence < self.min_confidence:
            return None
        best = max((i for i, c in enumerate(self._class_of) if c == class_id), key=lambda i: probabilities[i])
        reason = self._labels[best].split("/", 1)[1]
        leaned_on = self._leaned_on(columns, values, best) if explain else {}
        return Guess(class_id, reason, round(confidence, 4), leaned_on)

    def _leaned_on(self, columns: _Columns, values: _Values, label: int) -> dict[str, Any]:
        """The strongest features for the chosen label, and the nearest labelled examples."""
        fitted = self._fitted
        weights = fitted.weights[:, label]
        contributions = sorted(zip((values * weights[columns]).tolist(), columns.tolist(), strict=True),
                               reverse=True)[:_STRONGEST]
        similarity: NDArray[numpy.float64] = numpy.zeros(fitted.train_rows.shape[0])
        if len(columns):  # the cosine of L2-normalized rows: a sparse dot product with this row
            similarity = numpy.asarray(fitted.train_rows[:, columns] @ values).ravel()
        nearest = similarity.argsort()[::-1][:_NEAREST]
        return {
            "model": "linear classifier (logistic loss) over character n-grams and shape tokens",
            "strongest_features": [{"feature": self._feature_name(j), "weight": round(w, 3)}
                                   for w, j in contributions if w > 0],
            "nearest_examples": [{"from": fitted.train[i][0], "label": fitted.train[i][1],
                                  "message": fitted.train[i][2], "similarity": round(float(similarity[i]), 3)}
                                 for i in nearest],
        }

    def _feature_name(self, column: int) -> str:
        chars = self._fitted.char_terms
        return f"'{chars[column]}'" if column < len(chars) else self._fitted.word_terms[column - len(chars)]


class _Block:
    """One fitted vectorizer's transform for one text, without sklearn's per-call checks.

    A `per_word` analyzer (char_wb: n-grams never cross a word's edge) is run a word at a time,
    and each word's known columns are kept: words recur across reports, and generating a word's
    n-grams and looking each up in a vocabulary of ~10^5 terms was most of the unknown path's
    cost. The columns and counts come out in the same order as from the whole text."""

    def __init__(self, analyze: Callable[[str], list[str]], terms: list[str], idf: NDArray[numpy.float64],
                 sublinear: bool, offset: int, per_word: bool = False) -> None:
        self._analyze = analyze
        self._vocabulary = {term: column for column, term in enumerate(terms)}  # a Python loop: no GIL-long call
        self._idf = idf
        self._sublinear = sublinear
        self._offset = offset
        self._per_word = per_word
        self._word_columns: dict[str, tuple[int, ...]] = {}  # a pure memo; bounded, cleared when full

    def vector(self, text: str) -> tuple[_Columns, _Values]:
        """This block's tf-idf entries (L2-normalized within the block, as TfidfVectorizer does)."""
        counted = self._counted_words(text) if self._per_word else self._counted(text)
        if not counted:
            return _NO_COLUMNS, _NO_VALUES
        found = numpy.fromiter(counted.keys(), dtype=numpy.intp, count=len(counted))
        seen = numpy.fromiter(counted.values(), dtype=numpy.float64, count=len(counted))
        weights = (1.0 + numpy.log(seen) if self._sublinear else seen) * self._idf[found]
        return found + self._offset, weights / math.sqrt(weights @ weights)

    def _known(self, text: str) -> list[int]:
        """The column of each of the text's terms the vocabulary has, in the analyzer's order."""
        return [column for column in map(self._vocabulary.get, self._analyze(text)) if column is not None]

    def _counted(self, text: str) -> Counter[int]:
        """Each known column of the text, with how often its term occurs (counted in C)."""
        return Counter(self._known(text))

    def _counted_words(self, text: str) -> Counter[int]:
        found: list[int] = []
        memo = self._word_columns
        for word in text.split():
            known = memo.get(word)
            if known is None:
                if len(memo) >= WORD_MEMO_SIZE:
                    memo.clear()
                known = memo[word] = tuple(self._known(word))
            found += known
        return Counter(found)


def enough_to_learn(examples: list[Example]) -> bool:
    """At least 20 examples and two labels."""
    return len(examples) >= _MIN_EXAMPLES and len({(e.class_, e.reason) for e in examples}) >= 2


def train(examples: Iterable[Example], min_confidence: float) -> Fallback | None:
    """A trained fallback, in this process, or None when there is too little to learn from."""
    examples = list(examples)
    return Fallback(fit(examples), min_confidence) if enough_to_learn(examples) else None
