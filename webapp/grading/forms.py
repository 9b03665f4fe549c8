"""The grading panel's forms: they parse and validate shapes; services decide."""

from django import forms

from grading.profiles import BUILTIN, ProfileError, load_profiles
from grading.rankings import FLAGS
from grading.schedules import SCHEDULES
from webapp.advantages import AdvantageConfig


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
        initial = {"schedule": config.schedule, "w_flag": config.w_flag, "flag_names": list(config.flag_names),
                   "norm_by_std": config.norm_by_std, "unbiased_std": config.unbiased_std}
        for name, value in config.params.items():
            initial[name] = ",".join(f"{v:g}" for v in value) if name == "factors" else value
        return cls(initial=initial)

    def config_fields(self) -> dict:
        """What was submitted, as AdvantageConfig's fields: only the parameters that the
        chosen schedule takes (`advantages.parse_advantage_config` validates them)."""
        data = self.cleaned_data
        params = {name: data[name] for name in SCHEDULES[data["schedule"]].checks
                  if data.get(name) not in (None, "")}
        return {"schedule": data["schedule"], "params": params, "norm_by_std": data["norm_by_std"],
                "unbiased_std": data["unbiased_std"], "w_flag": data["w_flag"], "flag_names": data["flag_names"]}
