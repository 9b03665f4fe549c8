"""The tokens page's form: it validates the name; services make the token."""

from django import forms


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name", help_text="What the token is for, e.g. the training run.")
