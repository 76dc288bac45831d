"""Billing's page forms (the services check what they write)."""

from django import forms

from portal.forms import MoneyFormField


class BudgetForm(forms.Form):
    """A tenant's budget for each month: money or tokens, and the thresholds that alert."""

    amount = MoneyFormField(required=False, positive=True, label="Amount per month")
    tokens = forms.IntegerField(required=False, min_value=1, label="or tokens per month")
    thresholds = forms.CharField(
        initial="50, 80, 100", label="Alert at (% of the budget)", help_text="e.g. 50, 80, 100"
    )

    def clean(self) -> dict:
        data = super().clean()
        if (data.get("amount") is None) == (data.get("tokens") is None):
            raise forms.ValidationError("Give an amount or a number of tokens, one of them.")
        return data

    def params(self) -> dict:
        data = self.cleaned_data
        try:
            thresholds = [int(p) for p in data["thresholds"].replace(" ", "").split(",") if p]
        except ValueError:
            thresholds = data["thresholds"]  # the service names what is wrong
        if data.get("amount") is not None:
            return {"amount": f"{data['amount']:.2f}", "thresholds": thresholds}
        return {"tokens": data["tokens"], "thresholds": thresholds}
