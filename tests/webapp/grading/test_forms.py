"""The redistribution form asks for each of AdvantageConfig's fields and gives back a parsed config."""

from dataclasses import fields

from grading.schedules import SCHEDULES
from webapp.advantages.config import DEFAULT_CONFIG, AdvantageConfig, parse_advantage_config
from webapp.grading.forms import AdvantageConfigForm


def test_it_asks_for_every_field_of_the_config_and_every_schedule_parameter():
    asked = set(AdvantageConfigForm.base_fields)
    assert {f.name for f in fields(AdvantageConfig)} - {"params"} <= asked
    assert {name for schedule in SCHEDULES.values() for name in schedule.checks} <= asked


def test_a_config_shown_and_sent_back_unchanged_is_the_same_config():
    config = parse_advantage_config({"schedule": "tiered", "params": {"factors": [1, 0.5]}, "w_flag": None,
                                     "norm_by_std": False})
    for shown in (DEFAULT_CONFIG, config):
        initial = AdvantageConfigForm.for_config(shown).initial
        form = AdvantageConfigForm({name: value for name, value in initial.items()
                                    if value is not None and value is not False})  # as a browser sends them
        assert form.is_valid(), form.errors
        assert form.cleaned_data["config"] == shown


def test_a_config_the_parser_refuses_is_the_forms_error():
    form = AdvantageConfigForm({"schedule": "linear", "w_min": "7"})
    assert not form.is_valid()
    assert "w_min must be in (0, 1]" in form.non_field_errors()[0]
