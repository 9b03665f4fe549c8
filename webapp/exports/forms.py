"""The export panel's launch form: it parses the shape; `export_launch` validates the config."""

import json

from django import forms

from webapp.models import Export


class ExportForm(forms.Form):
    """One form per kind on the panel (the kind and, for SFT, the format are hidden fields);
    `config` is a JSON object: for advantages the redistribution config, for SFT its options.
    `allow_ungraded`: export advantages while grading runs (`export_launch`)."""

    kind = forms.ChoiceField(choices=Export.Kind.choices, widget=forms.HiddenInput)
    format = forms.ChoiceField(choices=Export.Format.choices, initial=Export.Format.PARQUET)
    config = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 7, "cols": 60}),
                             help_text="A JSON object; {} keeps the defaults.")
    allow_ungraded = forms.BooleanField(
        required=False, label="Export anyway",
        help_text="while grading of the batch is queued or running: its groups keep GRPO's advantages, "
                  "and the manifest counts them")

    def __init__(self, *args, kind: str, **kwargs):
        kwargs.setdefault("auto_id", f"export-{kind}-%s")
        kwargs.setdefault("label_suffix", "")
        kwargs.setdefault("initial", {})
        kwargs["initial"].setdefault("kind", kind)
        super().__init__(*args, **kwargs)
        if kind == Export.Kind.SFT:
            self.fields["format"].widget = forms.HiddenInput()
            self.fields["format"].initial = Export.Format.JSONL

    def clean_config(self) -> dict:
        text = self.cleaned_data["config"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"not JSON: {error}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("must be a JSON object, {...}")
        return value
