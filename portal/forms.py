from django import forms

from portal.models import Scope


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name", help_text="What the token is for.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, label="Scopes"
    )

    def __init__(self, *args, allowed: frozenset[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["scopes"].choices = [c for c in Scope.choices if c[0] in allowed]
