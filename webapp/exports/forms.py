"""The export panel's launch form: it parses the shape; `export_launch` validates the config."""

import json

from django import forms

from webapp.exports.formats import formats_of
from webapp.models import Export


class ExportForm(forms.Form):
    """One form per kind on the panel, the kind a hidden field; `format` offers the kind's
    registered formats (webapp/exports/formats.py), the first one first, and is hidden while
    the kind has only one. `config` is a JSON object: for advantages the redistribution
    config, for SFT its options. `allow_ungraded`: export advantages while grading runs
    (`export_launch`)."""

    kind = forms.ChoiceField(choices=Export.Kind.choices, widget=forms.HiddenInput)
    format = forms.ChoiceField()
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
        formats = formats_of(kind)
        field = self.fields["format"]
        if len(formats) == 1:
            field.widget = forms.HiddenInput()
        field.choices = [(fmt.name, fmt.label) for fmt in formats]
        field.initial = formats[0].name

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
