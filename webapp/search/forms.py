"""The search page's form: it only validates; the selector searches."""

from django import forms

from webapp.search.selectors import MAX_CHARS, MIN_CHARS
from webapp.search.services import PATCH, STATEMENT, TURN

KIND_CHOICES = [("", "everywhere"), (STATEMENT, "task statements"), (PATCH, "patches"), (TURN, "transcripts")]


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=MAX_CHARS, strip=True, label="Search",
                        error_messages={"max_length": f"is longer than {MAX_CHARS} characters"})
    kind = forms.ChoiceField(required=False, choices=KIND_CHOICES, label="In")
    after = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["q"].widget.attrs.update(placeholder="text, an identifier, a path…", type="search",
                                             autofocus=True, minlength=MIN_CHARS)

    def clean_q(self):
        q = self.cleaned_data["q"]
        if q and len(q) < MIN_CHARS:
            raise forms.ValidationError(f"needs at least {MIN_CHARS} characters")
        return q
