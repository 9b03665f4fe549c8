"""The batch page's filter form and the batches page's import form: they only validate."""

from django import forms

from grading.formats import FORMATS
from grading.rankings import FLAGS
from webapp.batches.selectors import DEFAULT_SORT, FIELD_COLUMNS, SORT_COLUMNS, SORTS, GroupFilter
from webapp.batches.services import BATCH_NAME_MAX_CHARS, batch_name_problem, normalized_batch_name
from webapp.models import Group
from webapp.rankings import HUMAN_REVIEW_FILTERS
from webapp.triage import REVIEW_STATES

SORT_LABELS = {
    "group": "group id",
    "-group": "group id, descending",
    "pass_rate": "pass rate, lowest first",
    "-pass_rate": "pass rate, highest first",
    "confidence": "grader confidence, lowest first",
    "-confidence": "grader confidence, highest first",
    "agreement": "human–grader agreement, lowest first",
    "-agreement": "human–grader agreement, highest first",
    "lines": "top pick's lines over the shortest, fewest first",
    "-lines": "top pick's lines over the shortest, most first",
}

HIDDEN = "hidden from you in this batch (blind review or k-way overlap): not applied"

PERCENT = "a pass rate is a percentage from 0 to 100"
FLAG_CHOICES = [("", "any"), *((name, name.replace("_", " ")) for name in FLAGS)]


class GroupFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, strip=True, label="Search")
    label = forms.ChoiceField(required=False, choices=[("", "any label"), *Group.Label.choices])
    # In percent, as the page shows pass rates; the filter takes fractions.
    pass_min = forms.FloatField(required=False, min_value=0, max_value=100, label="Pass rate from (%)",
                                error_messages={"min_value": PERCENT, "max_value": PERCENT})
    pass_max = forms.FloatField(required=False, min_value=0, max_value=100, label="Pass rate to (%)",
                                error_messages={"min_value": PERCENT, "max_value": PERCENT})
    graded = forms.ChoiceField(required=False, choices=[("", "graded or not"), ("yes", "graded"),
                                                        ("no", "not graded")])
    review = forms.ChoiceField(required=False, choices=[("", "any"), *HUMAN_REVIEW_FILTERS.items()],
                               label="Human review")
    top_flag = forms.ChoiceField(required=False, choices=FLAG_CHOICES, label="Top pick flagged")
    any_flag = forms.ChoiceField(required=False, choices=FLAG_CHOICES, label="Flag anywhere")
    conf_min = forms.FloatField(required=False, label="Confidence from")
    conf_max = forms.FloatField(required=False, label="Confidence to")
    agreement = forms.ChoiceField(required=False, label="Human vs grader", choices=[
        ("", "any"), ("disagrees", "human disagrees"), ("agrees", "human agrees")])
    state = forms.ChoiceField(required=False, choices=[("", "any"), *((v, v) for v in REVIEW_STATES)],
                              label="Review state")
    vs_shortest = forms.ChoiceField(required=False, label="Grader's pick vs shortest", choices=[
        ("", "any"), ("agrees", "a shortest patch"), ("differs", "longer than the shortest")])
    vs_consensus = forms.ChoiceField(required=False, label="Grader's pick vs consensus", choices=[
        ("", "any"), ("agrees", "the consensus change"), ("differs", "not the consensus")])
    evidence = forms.ChoiceField(required=False, label="Execution evidence", choices=[
        ("", "any"), ("breaks", "a passing candidate breaks tests others pass")])
    sort = forms.ChoiceField(required=False, choices=[(k, SORT_LABELS[k]) for k in SORTS])

    def __init__(self, *args, columns: frozenset[str], **kwargs):
        """`columns`: the triage columns the user may see (webapp.triage.visible_triage);
        a filter or sort by any other is refused, as filtering by hidden data reveals it."""
        super().__init__(*args, **kwargs)
        self.columns = columns
        self.fields["q"].widget.attrs.update(placeholder="group id, task id or statement", type="search")
        for name in ("pass_min", "pass_max"):
            self.fields[name].widget.attrs.update(step="any", min="0", max="100")
        for name in ("conf_min", "conf_max"):
            self.fields[name].widget.attrs.update(step="any")

    def shows(self, name: str) -> bool:
        """Whether the filter field `name` is one this user may use."""
        return name not in FIELD_COLUMNS or FIELD_COLUMNS[name] in self.columns

    def clean(self):
        data = super().clean()
        for name in FIELD_COLUMNS:
            if data.get(name) not in (None, "") and not self.shows(name):
                self.add_error(name, HIDDEN)
        if data.get("sort") in SORT_COLUMNS and SORT_COLUMNS[data["sort"]] not in self.columns:
            self.add_error("sort", HIDDEN)
        return data

    def to_filter(self) -> GroupFilter:
        """The valid part of the input; a bad value is left out, not an error page, and the
        page says which (`form.errors`)."""
        self.is_valid()
        data = {name: value for name, value in self.cleaned_data.items() if name not in self.errors}
        return GroupFilter(
            label=data.get("label") or "",
            pass_min=_fraction(data.get("pass_min")),
            pass_max=_fraction(data.get("pass_max")),
            graded=data.get("graded") or "",
            review=data.get("review") or "",
            q=data.get("q") or "",
            top_flag=data.get("top_flag") or "",
            any_flag=data.get("any_flag") or "",
            conf_min=data.get("conf_min"),
            conf_max=data.get("conf_max"),
            agreement=data.get("agreement") or "",
            state=data.get("state") or "",
            vs_shortest=data.get("vs_shortest") or "",
            vs_consensus=data.get("vs_consensus") or "",
            evidence=data.get("evidence") or "",
            sort=data.get("sort") or DEFAULT_SORT,
        )


def _fraction(percent: float | None) -> float | None:
    return None if percent is None else percent / 100


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files from one input (Django's documented pattern)."""

    widget = MultipleFileInput

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data] if data else []
        if self.required and not files:
            raise forms.ValidationError(self.error_messages["required"], code="required")
        clean_one = super().clean
        return [clean_one(file, initial) for file in files]


class ImportForm(forms.Form):
    """An import from the batches page: files in one of the formats (grading.formats.FORMATS)."""

    name = forms.CharField(label="Batch name", max_length=BATCH_NAME_MAX_CHARS)
    file_format = forms.ChoiceField(label="Format", choices=[(name, name) for name in FORMATS], initial="jsonl")
    paths = MultipleFileField(label="Rollout files (swebench: one per run; swe-agent, openhands: "
                                    "archives of run folders)")
    reports = MultipleFileField(label="Evaluation reports (one per run, in the order of the runs)", required=False)
    tasks = MultipleFileField(label="Task file (swebench, swe-agent; optional)", required=False)
    append = forms.BooleanField(label="Add to the batch if it exists", required=False)

    def clean_name(self):
        name = normalized_batch_name(self.cleaned_data["name"])
        problem = batch_name_problem(name)
        if problem:
            raise forms.ValidationError(problem)
        return name
