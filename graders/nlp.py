"""NLP similarity graders: BLEU, ROUGE-L and METEOR, each scored 0..1.

- BLEU: sacrebleu's sentence BLEU (default tokenizer ``13a``, ``exp`` smoothing) / 100.
- ROUGE: rouge-score's ROUGE-L F-measure (no stemming) is the recorded score. Its default
  tokenizer keeps only ASCII letters and digits, so non-Latin text scores 0.
- METEOR: nltk's ``meteor_score`` on lowercased word/punctuation tokens. It needs NLTK's WordNet
  data; when that is not installed (the usual case offline) the grade is "could not grade" with
  a plain message. Nothing is ever downloaded at run time.

Without a threshold a grade passes iff its score >= 0.5. An empty or missing response is graded
as empty text (score 0). ``response_path`` grades one JSON leaf, as for equality/numeric.
The libraries (~2.5 s to import together) are imported with this module, which the engine imports
only when a metric of the run needs it (``runs.core.engine.metrics``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sacrebleu
from nltk.corpus import wordnet
from nltk.translate.meteor_score import meteor_score
from rouge_score import rouge_scorer

from graders.deterministic import passes, resolve_response, timed
from graders.result import Grade, error_text

DEFAULT_NLP_THRESHOLD = 0.5
METEOR_NO_WORDNET = (
    "METEOR needs NLTK's WordNet data, which is not installed "
    "(python -m nltk.downloader wordnet); not graded"
)
_TOKEN = re.compile(r"\w+|[^\w\s]")


# The shape of grade_bleu / grade_rouge / grade_meteor (response, expected, *, threshold=...,
# response_path=...).
NlpGrader = Callable[..., Grade]


def nlp_grader(
    label: str, score: Callable[[str, str], float], *, needs_wordnet: bool = False
) -> NlpGrader:
    """The grader scoring with ``score(response text, expected text)`` in 0..1, named
    ``label`` in its reasons; ``needs_wordnet``: "could not grade" without NLTK's WordNet."""

    def grade(
        response: str | None,
        expected: str,
        *,
        threshold: float | None = None,
        response_path: str | None = None,
    ) -> Grade:
        def run() -> Grade:
            if needs_wordnet and not wordnet_available():
                return Grade.could_not_grade(METEOR_NO_WORDNET, threshold=threshold)
            return _grade_untimed(label, score, response, expected, threshold, response_path)

        return timed(run)

    return grade


def _bleu(hypothesis: str, reference: str) -> float:
    return float(sacrebleu.sentence_bleu(hypothesis, [reference]).score) / 100


def _rouge(hypothesis: str, reference: str) -> float:
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    # RougeScorer.score(target, prediction): the reference comes first.
    return float(scorer.score(reference, hypothesis)["rougeL"].fmeasure)


def wordnet_available() -> bool:
    """Whether NLTK can load WordNet from local data (never downloads)."""
    try:
        wordnet.ensure_loaded()
    except LookupError:
        return False
    return True


def _meteor(hypothesis: str, reference: str) -> float:
    hyp, ref = _tokens(hypothesis), _tokens(reference)
    if not hyp or not ref:
        return 0.0
    return float(meteor_score([ref], hyp))


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


grade_bleu = nlp_grader("BLEU", _bleu)
grade_rouge = nlp_grader("ROUGE-L F", _rouge)
# _meteor is looked up at each call, so a test may replace it.
grade_meteor = nlp_grader("METEOR", lambda hyp, ref: _meteor(hyp, ref), needs_wordnet=True)


# --- shared --------------------------------------------------------------------------------


def _grade_untimed(
    label: str,
    score_fn: Callable[[str, str], float],
    response: str | None,
    expected: str,
    threshold: float | None,
    response_path: str | None,
) -> Grade:
    try:
        text = resolve_response(response, response_path)
    except ValueError as exc:
        return Grade.could_not_grade(str(exc), threshold=threshold)
    try:
        raw = score_fn(text, expected or "")
    except LookupError as exc:
        # nltk raises LookupError for missing data (METEOR's WordNet); report it, never crash.
        message = METEOR_NO_WORDNET if label == "METEOR" else f"{label} needs missing data: {exc}"
        return Grade.could_not_grade(message, threshold=threshold)
    except Exception as exc:
        return Grade.could_not_grade(f"{label} failed: {error_text(exc)}", threshold=threshold)
    # sacrebleu gives 100.00000000000004 for identical text.
    score = min(max(raw, 0.0), 1.0)
    bar = threshold if threshold is not None else DEFAULT_NLP_THRESHOLD
    passed = passes(score, threshold, DEFAULT_NLP_THRESHOLD)
    relation = ">=" if passed else "<"
    default = "" if threshold is not None else " (default threshold)"
    return Grade(
        score=score,
        passed=passed,
        threshold=threshold,
        reason=f"{label} {score:.4f} {relation} {bar:g}{default}",
    )


__all__ = [
    "DEFAULT_NLP_THRESHOLD",
    "METEOR_NO_WORDNET",
    "NlpGrader",
    "grade_bleu",
    "grade_meteor",
    "grade_rouge",
    "wordnet_available",
]
