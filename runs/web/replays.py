"""What-if replay from a run's pages: the form (a prompt editor prefilled from what the run ran,
the agent's prompt files, the model and its parameters, a commit, the tool policy, the cases)
and its submit, which queues the replay and opens the side by side of the run and its replay.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from django import forms
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from pydantic import ValidationError

from runs import selectors
from runs.core.agentconfig.errors import ConfigError
from runs.core.reviewing.vocabulary import Role
from runs.core.runoptions.replay import POLICIES, POLICY_TEXTS, ReplayChanges, ReplayParams
from runs.selectors.replays import ReplayFormData, filtered_case_indices, replay_form_data
from runs.services.launch import LaunchError
from runs.services.replay import run_replay as replay
from runs.web.case_list import RunCaseFilters, case_filters
from runs.web.params import params_or_errors
from runs.web.views import form_page, project_of_run, role_required

if TYPE_CHECKING:
    from runs.models import Run

# "failed", or case indices ("3", "0,2,5"): ASCII digits, nothing after them.
_CASES = re.compile(r"\A(?:failed|[0-9]{1,9}(?:,[0-9]{1,9}){0,999})\Z", re.ASCII)


class ReplayForm(forms.Form):
    cases = forms.TypedMultipleChoiceField(
        coerce=int, required=False, label="Cases", widget=forms.CheckboxSelectMultiple
    )
    case_indices = forms.CharField(
        required=False,
        max_length=20_000,
        label="More cases by index",
        help_text="Indices separated by commas, besides those checked.",
    )
    prompt_text = forms.CharField(
        required=False,
        max_length=200_000,
        label="System prompt",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 14, "class": "mono prompt-editor"}),
        help_text="Prefilled with what the run ran: edit it, or pick a file below instead.",
    )
    prompt_file = forms.ChoiceField(
        required=False,
        label="Or read the system prompt from a file of the agent",
        help_text="A file of the agent's directory as the run's snapshot holds it.",
    )
    model = forms.CharField(required=False, max_length=200, label="Model")
    temperature = forms.FloatField(required=False, min_value=0, max_value=2, label="Temperature")
    max_tokens = forms.IntegerField(required=False, min_value=1, label="Max tokens")
    top_p = forms.FloatField(required=False, min_value=0, max_value=1, label="Top p")
    commit = forms.CharField(
        required=False,
        max_length=200,
        label="Commit",
        help_text="A branch, tag or commit of the project: the agent at that commit is replayed."
        " Empty: the files the run ran.",
    )
    tools = forms.ChoiceField(
        choices=[(name, name) for name in POLICIES],
        initial="recorded-only",
        label="Tools",
        widget=forms.RadioSelect,
    )
    idempotency_key = forms.CharField(required=False, max_length=100, widget=forms.HiddenInput)

    def __init__(self, *args: Any, data_of: ReplayFormData, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.data_of = data_of
        cases: Any = self.fields["cases"]
        cases.choices = [(c.index, c.index) for c in data_of.cases]
        files: Any = self.fields["prompt_file"]
        files.choices = [("", "— the prompt above —"), *((f, f) for f in data_of.prompt_files)]

    def changes(self) -> ReplayChanges:
        data = self.cleaned_data
        prompt = data["prompt_text"].replace("\r\n", "\n")
        params = {key: data[key] for key in ("temperature", "max_tokens", "top_p")}
        return ReplayChanges(
            prompt_text=None if data["prompt_file"] else prompt,
            prompt_file=data["prompt_file"] or None,
            model=data["model"] if data["model"] != self.data_of.model else None,
            params=ReplayParams(
                **{k: v for k, v in params.items() if v is not None and v != self.data_of.params[k]}
            ),
            commit=data["commit"],
        )

    def chosen(self) -> list[int]:
        typed = self.cleaned_data["case_indices"].replace(" ", "").strip(",")
        if typed and not _CASES.fullmatch(typed):
            self.add_error("case_indices", "Give case indices separated by commas.")
        more = [int(i) for i in typed.split(",")] if typed and _CASES.fullmatch(typed) else []
        return sorted({*self.cleaned_data["cases"], *more})


@role_required(Role.RUNNER, action="replay runs", project_of=project_of_run)
@require_http_methods(["GET", "POST"])
def run_replay(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET: the replay form of the run, its failed cases chosen (``?cases=failed``, the
    default), those of ``?cases=0,3`` or those its case list shows with the run page's
    filters (``?metric=rouge&q=refund``). POST: queue the replay and open the side by side of
    the run and its replay; a refusal is shown on the form, nothing queued."""
    original = selectors.run_row(run_id=run_id)
    if request.method == "POST":
        return _submit(request, original)
    data = replay_form_data(run=original, chosen=_chosen(request, original))
    initial = {
        "cases": [c.index for c in data.cases if c.chosen],
        "case_indices": ",".join(map(str, data.unlisted)),
        "prompt_text": data.prompt,
        "model": data.model,
        "tools": "recorded-only",
        "idempotency_key": uuid.uuid4().hex,
        **{key: value for key, value in data.params.items() if value is not None},
    }
    form = ReplayForm(initial=initial, data_of=data)
    return _page(request, original, form, data)


def _submit(request: HttpRequest, original: Run) -> HttpResponse:

    data = replay_form_data(run=original, chosen=[])
    form = ReplayForm(request.POST, data_of=data)
    if not form.is_valid():
        return _page(request, original, form, data, problems=[])
    chosen = form.chosen()
    if not form.is_valid():
        return _page(request, original, form, data, problems=[])
    if not chosen:
        return _page(request, original, form, data, problems=["Choose at least one case."])
    try:
        changes = form.changes()
    except ValidationError as exc:  # a parameter past the model's limits
        return _page(request, original, form, data, problems=[str(exc)])
    try:
        run = replay(
            original=original,
            cases=chosen,
            changes=changes,
            policy=form.cleaned_data["tools"],
            user=request.user,
            idempotency_key=form.cleaned_data["idempotency_key"].strip(),
        )
    except ConfigError as exc:
        return _page(request, original, form, data, problems=exc.lines()[:10])
    except LaunchError as exc:  # a ReplayError, or its idempotency key's refusal
        return _page(request, original, form, data, problems=[str(exc)])
    return HttpResponseRedirect(f"{reverse('compare')}?runs={original.pk},{run.pk}")


def _page(
    request: HttpRequest,
    original: Run,
    form: ReplayForm,
    data: ReplayFormData,
    problems: list[str] | None = None,
) -> HttpResponse:
    return form_page(
        request,
        "runs/replay.html",
        {
            "run": original,
            "form": form,
            "data": data,
            "policies": list(POLICY_TEXTS.items()),
            "problems": problems or [],
            "checked": _checked(form, data),
            "model_fields": [
                form[name] for name in ("model", "temperature", "max_tokens", "top_p")
            ],
        },
    )


def _checked(form: ReplayForm, data: ReplayFormData) -> set[int]:
    """The cases shown checked: those sent back, else those chosen."""
    if not form.is_bound:
        return {case.index for case in data.cases if case.chosen}
    sent: Any = form.data
    return {int(v) for v in sent.getlist("cases") if v.isascii() and v.isdigit()}


def _chosen(request: HttpRequest, original: Run) -> list[int] | None:
    """The cases the form opens with: ``?cases=failed`` (None: the failed ones), ``?cases=0,3``,
    or, with the run page's case-list filters (``?metric=rouge``), the cases it shows."""
    asked = request.GET.get("cases", "")
    if asked and asked != "failed":
        return sorted({int(i) for i in asked.split(",")}) if _CASES.fullmatch(asked) else None
    filters, _ = params_or_errors(request, case_filters)
    if asked or filters == RunCaseFilters():
        return None
    return filtered_case_indices(run=original, filters=filters, review=filters.review)
