"""The batch page's filter form: it only validates; the selector filters."""

from django import forms

from webapp.batches.selectors import DEFAULT_SORT, SORTS, GroupFilter
from webapp.models import Group
from webapp.rankings import REVIEW_STATES

SORT_LABELS = {
    "group": "group id",
    "-group": "group id, descending",
    "pass_rate": "pass rate, lowest first",
    "-pass_rate": "pass rate, highest first",
}


PERCENT = "a pass rate is a percentage from 0 to 100"


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
    review = forms.ChoiceField(required=False, choices=[("", "any"), *REVIEW_STATES.items()], label="Human review")
    sort = forms.ChoiceField(required=False, choices=[(k, SORT_LABELS[k]) for k in SORTS])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["q"].widget.attrs.update(placeholder="group id, task id or statement", type="search")
        for name in ("pass_min", "pass_max"):
            self.fields[name].widget.attrs.update(step="any", min="0", max="100")

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
            sort=data.get("sort") or DEFAULT_SORT,
        )


def _fraction(percent: float | None) -> float | None:
    return None if percent is None else percent / 100
