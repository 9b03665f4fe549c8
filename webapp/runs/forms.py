"""The run pages' forms: which runs to compare, and how many recent steps to keep whole."""

from django import forms


class CompareForm(forms.Form):
    run = forms.TypedMultipleChoiceField(coerce=int, label="Runs", widget=forms.CheckboxSelectMultiple,
                                         help_text="two or more, e.g. a GAGAR run and its plain-GRPO baseline")

    def __init__(self, *args, runs, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].choices = [(run.pk, run.name) for run in runs]

    def clean_run(self):
        chosen = list(dict.fromkeys(self.cleaned_data["run"]))
        if len(chosen) < 2:
            raise forms.ValidationError("pick at least two runs to compare")
        return chosen


class PruneForm(forms.Form):
    keep_last = forms.IntegerField(min_value=0, max_value=10**6, label="Keep the last",
                                   help_text="steps whole; older steps lose their transcripts, rendered patches and "
                                             "search entries (rankings, advantages and figures stay)")
