"""The run pages' forms: which runs to compare, and how many recent steps to keep whole."""

from django import forms


class CompareForm(forms.Form):
    run = forms.TypedMultipleChoiceField(coerce=int, label="Runs", widget=forms.CheckboxSelectMultiple,
                                         help_text="two or more, e.g. a GAGAR run and its plain-GRPO baseline")
    baseline = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label="Differences from",
                                      help_text="the run the others' means are measured against (the first ticked: "
                                                "when none is chosen)")

    def __init__(self, *args, runs, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].choices = [(run.pk, run.name) for run in runs]
        self.fields["baseline"].choices = [("", "the first run ticked")] + self.fields["run"].choices

    def clean_run(self):
        chosen = list(dict.fromkeys(self.cleaned_data["run"]))
        if len(chosen) < 2:
            raise forms.ValidationError("pick at least two runs to compare")
        return chosen

    def clean(self):
        """The runs to compare, the baseline first: the differences are measured from the first."""
        data = super().clean()
        chosen, baseline = data.get("run"), data.get("baseline")
        if chosen and baseline is not None:
            if baseline not in chosen:
                self.add_error("baseline", "tick the baseline among the runs to compare")
            else:
                data["run"] = [baseline] + [pk for pk in chosen if pk != baseline]
        return data


class PruneForm(forms.Form):
    keep_last = forms.IntegerField(min_value=0, max_value=10**6, label="Keep the last",
                                   help_text="steps whole; older steps lose their transcripts, rendered patches and "
                                             "search entries (rankings, advantages and figures stay)")
