"""Forms of the audit pages: they parse and validate shapes; services decide."""

from django import forms

from grading.audit_sampling import STRATA
from webapp.audit.sampling import Source, SourceError, source_choices
from webapp.models import AuditSet, AuditVerdict

FEATURE_LABELS = {
    "confidence": "grader confidence",
    "margin": "score margin (best two)",
    "disagreement": "disagreement with another grader",
    "patch_size": "patch size (changed lines)",
    "pass_rate": "pass rate",
}
CONFIDENCES = [("0.9", "90%"), ("0.95", "95%"), ("0.99", "99%")]


class AuditSetForm(forms.Form):
    name = forms.CharField(max_length=200)
    source = forms.ChoiceField(label="Audit", help_text="A batch, one grading run, or a grader version.")
    stratify_by = forms.ChoiceField(
        label="Draw", required=False,
        choices=[("", "uniformly")] + [(s, f"stratified by {FEATURE_LABELS[s]}") for s in STRATA])
    bins = forms.IntegerField(min_value=1, max_value=20, initial=4, help_text="Strata: quantile bins of the feature.")
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=0)
    size = forms.IntegerField(min_value=1, required=False, help_text="Groups to audit; or give a target width.")
    half_width = forms.FloatField(
        label="Target ±", required=False, min_value=0.001, max_value=0.5,
        help_text="Half-width of the interval on a proportion (top-1 agreement), e.g. 0.05.")
    confidence = forms.TypedChoiceField(choices=CONFIDENCES, coerce=float, initial="0.95", empty_value=0.95)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source"].choices = source_choices()

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if AuditSet.objects.filter(name=name).exists():
            raise forms.ValidationError(f"an audit set named {name!r} exists already")
        return name

    def clean_source(self):
        try:
            return Source.parse(self.cleaned_data["source"])
        except SourceError as error:
            raise forms.ValidationError(str(error)) from None

    def clean_stratify_by(self):
        return self.cleaned_data["stratify_by"] or None

    def clean(self):
        data = super().clean()
        if data.get("size") is None and data.get("half_width") is None:
            raise forms.ValidationError("give a size, or a target ± half-width to size the set for")
        if data.get("size") is not None and data.get("half_width") is not None:
            raise forms.ValidationError("give either a size or a target ± half-width, not both")
        return data


class VerdictForm(forms.Form):
    verdict = forms.ChoiceField(choices=AuditVerdict.Verdict.choices, widget=forms.RadioSelect)
    categories = forms.MultipleChoiceField(choices=AuditVerdict.Category.choices, required=False,
                                           widget=forms.CheckboxSelectMultiple, label="Error categories")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "maxlength": 4000}))
