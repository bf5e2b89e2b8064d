"""The new-session form, and the model choices both pages show (from the provider config)."""

from __future__ import annotations

from django import forms

from providers.config import default_model, models


def model_choices() -> list[dict]:
    """Configured models as the API's `GET /api/v1/models/` describes them (no keys)."""
    return [spec.as_dict() for spec in models()]


def offline_only() -> bool:
    """True when no model with a real provider has its key set: only `offline` can answer."""
    return not any(m["provider"] != "offline" and m["key_present"] for m in model_choices())


class SessionCreateForm(forms.Form):
    title = forms.CharField(max_length=200, required=False, strip=True)
    model = forms.ChoiceField(choices=(), required=False)
    context_strategy = forms.ChoiceField(
        choices=[("state", "state (librarian summary)"), ("lcm", "lcm (summary DAG)")],
        initial="state",
    )
    tools_mode = forms.ChoiceField(
        choices=[("disabled", "disabled"), ("parse_only", "parse only"), ("enabled", "enabled")],
        initial="disabled",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rows = model_choices()
        self.fields["model"].choices = [
            (m["name"], f"{m['name']} ({m['provider']}{'' if m['key_present'] else ', no key'})")
            for m in rows
        ]
        self.fields["model"].initial = default_model().name

    def save(self, *, owner):
        from turns.services import session_create

        data = self.cleaned_data
        return session_create(
            owner=owner,
            title=data["title"],
            default_model=data["model"] or default_model().name,
            context_strategy=data["context_strategy"],
            tools_mode=data["tools_mode"],
        )
