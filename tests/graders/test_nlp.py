from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graders import nlp
from graders.nlp import (
    METEOR_NO_WORDNET,
    grade_bleu,
    grade_meteor,
    grade_rouge,
    wordnet_available,
)

REFERENCE = "The operating cash flow rose to 206588 thousand dollars in 2009"
UNRELATED = "Bananas are yellow and grow on tropical trees"


@pytest.mark.parametrize("grader", [grade_bleu, grade_rouge])
def test_identical_text_scores_one_and_passes(grader: nlp.NlpGrader) -> None:
    grade = grader(REFERENCE, REFERENCE)

    assert grade.score == 1.0
    assert grade.passed is True
    assert grade.error is None


@pytest.mark.parametrize("grader", [grade_bleu, grade_rouge])
def test_unrelated_text_scores_low_and_fails(grader: nlp.NlpGrader) -> None:
    grade = grader(UNRELATED, REFERENCE)

    assert grade.score is not None
    assert grade.score < 0.1
    assert grade.passed is False


def test_rouge_records_the_rouge_l_f_measure_as_the_score() -> None:
    # LCS "the cat on the mat" = 5 of 6 tokens both ways: P = R = F = 5/6.
    grade = grade_rouge("the cat sat on the mat", "the cat lay on the mat")

    assert grade.score == pytest.approx(5 / 6)


def test_bleu_is_sacrebleu_sentence_bleu_over_one_hundred() -> None:
    import sacrebleu

    hypothesis, reference = "the cat sat on the mat today", "the cat sat on the mat"
    expected = sacrebleu.sentence_bleu(hypothesis, [reference]).score / 100

    assert grade_bleu(hypothesis, reference).score == pytest.approx(expected)


@pytest.mark.parametrize(("threshold", "passed"), [(0.8, True), (0.9, False)])
def test_a_threshold_replaces_the_default_of_one_half(threshold: float, passed: bool) -> None:
    grade = grade_rouge("the cat sat on the mat", "the cat lay on the mat", threshold=threshold)

    assert grade.passed is passed
    assert grade.threshold == threshold


@pytest.mark.parametrize("grader", [grade_bleu, grade_rouge])
@pytest.mark.parametrize("response", ["", None])
def test_an_empty_response_is_graded_and_fails(grader: nlp.NlpGrader, response: str | None) -> None:
    grade = grader(response, REFERENCE)

    assert grade.score == 0.0
    assert grade.passed is False
    assert grade.error is None


def test_response_path_grades_one_json_leaf() -> None:
    response = json.dumps({"answer": REFERENCE})

    grade = grade_bleu(response, REFERENCE, response_path="answer")

    assert grade.score == 1.0


def test_meteor_gives_a_score_with_wordnet_or_the_clear_error_without_it() -> None:
    grade = grade_meteor(REFERENCE, REFERENCE)

    if wordnet_available():
        assert grade.error is None
        assert grade.score is not None
        assert grade.score > 0.9
    else:
        assert grade.error == METEOR_NO_WORDNET
        assert grade.score is None
        assert grade.passed is False


def test_meteor_without_wordnet_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nlp, "wordnet_available", lambda: False)

    grade = grade_meteor(REFERENCE, REFERENCE)

    assert grade.error == (
        "METEOR needs NLTK's WordNet data, which is not installed "
        "(python -m nltk.downloader wordnet); not graded"
    )


def test_meteor_missing_data_while_scoring_is_an_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(hypothesis: str, reference: str) -> float:
        raise LookupError("Resource 'omw-1.4' not found.")

    monkeypatch.setattr(nlp, "wordnet_available", lambda: True)
    monkeypatch.setattr(nlp, "_meteor", missing)

    assert grade_meteor(UNRELATED, REFERENCE).error == METEOR_NO_WORDNET


def test_every_nlp_grade_has_its_evaluation_time_measured() -> None:
    text = " ".join(f"w{i}" for i in range(3000))

    assert grade_rouge(text, text).evaluation_time_ms > 0


def test_importing_the_engine_imports_no_metric_library() -> None:
    """graders.nlp imports its libraries at its top; the engine imports it only when a metric
    needs it."""
    code = (
        "import sys, runs.core.engine.grading; "
        "print(sorted(m for m in ('sacrebleu', 'rouge_score', 'nltk') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"
