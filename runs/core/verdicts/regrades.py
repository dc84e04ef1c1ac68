"""What a re-grade is made of: the transcripts of one run, graded with another agent.yaml.

A re-grade has two sources, recorded apart (``Run.regrade_sources``, read as ``Run.regrade``):

- its **transcripts**: the run whose agent produced them (the first run of a chain of
  re-grades), at that run's commit and snapshot. The re-grade's own git identity (commit,
  branch, dirty flag, ref) is theirs: what was answered is what that commit's agent answered;
- its **grading**: the agent.yaml it was graded with, at a git ref (or the working tree) of
  the project, its commit and the snapshot the re-grade ran from.

So no list, chart or baseline rule takes a re-grade for a run of the grading commit. Plain data,
no Django: the recorder writes it, pages, the compare API and trends read it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

WORKING_TREE = "the working tree"
SHORT_COMMIT = 8
SHORT_DIGEST = 12


class TranscriptSource(BaseModel):
    """The run that produced the transcripts, its commit and snapshot digest ("" if none)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run: int
    commit: str = ""
    branch: str = ""
    snapshot: str = ""


class GradingSource(BaseModel):
    """The agent.yaml a re-grade was graded with: the git ref asked for ("" for the working
    tree), the commit it was read at (HEAD for the working tree), whether the tree had
    uncommitted changes, its path and the digest of the snapshot the re-grade ran."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    ref: str = ""
    commit: str = ""
    branch: str = ""
    dirty: bool = False
    agent_path: str = ""
    snapshot: str = ""

    @property
    def label(self) -> str:
        """The ref, or "the working tree": what the user chose to grade with."""
        return self.ref or WORKING_TREE


class RegradeSources(BaseModel):
    """A re-grade of run ``of``: where its transcripts come from and what graded them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    of: int  # the run re-graded (kept when that run is deleted)
    transcripts: TranscriptSource
    grading: GradingSource

    @classmethod
    def stored(cls, data: object) -> RegradeSources | None:
        """The sources stored as JSON (None for a run that is not a re-grade)."""
        if not isinstance(data, dict) or "grading" not in data:
            return None
        return cls.model_validate(data)

    @property
    def headline(self) -> str:
        """``"re-grade of #2 with loose"``."""
        return f"re-grade of #{self.of} with {self.grading.label}"

    @property
    def text(self) -> str:
        """``"transcripts: run #2 (commit 1a2b3c4d, snapshot 9f8e…) · graded with: loose
        (commit 5e6f7a8b, snapshot 0c1d…)"``."""
        t, g = self.transcripts, self.grading
        made = _where(t.commit, False, t.snapshot)
        graded = _where(g.commit, g.dirty, g.snapshot)
        return f"transcripts: run #{t.run} ({made}) · graded with: {g.label} ({graded})"


def _where(commit: str, dirty: bool, snapshot: str) -> str:
    parts = [f"commit {commit[:SHORT_COMMIT]}" if commit else "no commit"]
    if dirty:
        parts.append("dirty")
    parts.append(f"snapshot {snapshot[:SHORT_DIGEST]}" if snapshot else "no snapshot")
    return ", ".join(parts)
