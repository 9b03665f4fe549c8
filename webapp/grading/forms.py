"""The grading panel's forms: they parse and validate shapes; services decide."""

from dataclasses import fields

from django import forms

from grading.profiles import BUILTIN, ProfileError, load_profiles
from grading.rankings import FLAGS
from grading.schedules import SCHEDULES
from webapp.advantages.config import AdvantageConfig, parse_advantage_config


class PanelForm(forms.Form):
    """Field ids carry the form's name: the panel sits inside the batch page, beside its forms."""

    id_prefix = "grading"

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", f"{self.id_prefix}-%s")
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


class LaunchForm(PanelForm):
    id_prefix = "launch"
    grader = forms.ChoiceField(initial="heuristic", label="Grader profile")
    regrade = forms.BooleanField(required=False, label="Also regrade groups this grader already graded")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Profiles come from the $GAGAR_GRADERS file, read when the form is built.
        try:
            profiles = load_profiles()
        except ProfileError as error:
            profiles = dict(BUILTIN)
            self.profile_error = str(error)
        self.fields["grader"].choices = [
            (name, f"{name} ({p.backend or p.grader}, {p.queue} queue)") for name, p in sorted(profiles.items())
        ]


class CancelForm(forms.Form):
    run = forms.IntegerField(min_value=1, max_value=2**63 - 1)


class AdvantageConfigForm(PanelForm):
    """A field for each of AdvantageConfig's fields but `params`, which has one per schedule
    parameter. A valid form holds the parsed config in `cleaned_data["config"]`."""

    id_prefix = "redistribution"
    schedule = forms.ChoiceField(choices=[(name, name) for name in SCHEDULES])
    w_min = forms.FloatField(required=False, label="w_min")
    gamma = forms.FloatField(required=False, label="gamma")
    m = forms.IntegerField(required=False, label="m")
    temperature = forms.FloatField(required=False, label="temperature")
    factors = forms.CharField(required=False, label="factors (comma-separated)")
    w_flag = forms.FloatField(required=False, label="w_flag (cap for flagged trajectories)")
    flag_names = forms.MultipleChoiceField(required=False, choices=[(f, f) for f in FLAGS],
                                           widget=forms.CheckboxSelectMultiple, label="Flags that cap")
    norm_by_std = forms.BooleanField(required=False, label="divide by std (off: Dr. GRPO)")
    unbiased_std = forms.BooleanField(required=False, label="sample std (ddof=1)")

    @classmethod
    def for_config(cls, config: AdvantageConfig):
        initial = {name: value for name, value in config.as_dict().items() if name != "params"}
        for name, value in config.params.items():
            initial[name] = ",".join(f"{v:g}" for v in value) if name == "factors" else value
        return cls(initial=initial)

    def clean(self):
        """The config submitted: only the parameters that the chosen schedule takes, the rest
        of AdvantageConfig's fields as given (`parse_advantage_config` validates them)."""
        data = super().clean()
        if self.errors:
            return data
        params = {name: data[name] for name in SCHEDULES[data["schedule"]].checks
                  if data.get(name) not in (None, "")}
        given = {f.name: data[f.name] for f in fields(AdvantageConfig) if f.name != "params"}
        try:
            data["config"] = parse_advantage_config({**given, "params": params})
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None
        return data
