"""The `notifiers` setting: JSON notifier specs, checked when the settings are read (the
classes are imported only when an alert is sent), with errors naming the entry and field."""

from __future__ import annotations

import pytest

from tokokita_etl.errors import ConfigError
from tokokita_etl.pipelines import load_settings
from tokokita_etl.settings.values import DEFAULT_NOTIFIER_EVENTS, parse_notifiers

SMTP = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"


def test_a_notifier_spec_gets_the_default_events_and_empty_kwargs():
    assert parse_notifiers(f'[{{"class": "{SMTP}"}}]') == [
        {"class": SMTP, "kwargs": {}, "on": list(DEFAULT_NOTIFIER_EVENTS)}]
    assert parse_notifiers("") == []


@pytest.mark.parametrize(("text", "problem"), [
    ("{", "is not JSON (Expecting property name enclosed in double quotes at line 1 column 2); "
          'expected a list like [{"class": "package.module.Notifier", "kwargs": {}}]'),
    ('{"class": "a.B"}', "must be a JSON list of notifiers, got dict"),
    ('["a.B"]', 'notifier [0] must be an object, got "a.B"'),
    ('[{"class": "a.B"}, {"class": "Notifier"}]',
     'notifier [1] class must be an import path like package.module.Notifier, got "Notifier"'),
    ('[{"class": "a.B", "kwargs": []}]', "notifier [0] kwargs must be an object, got []"),
    ('[{"class": "a.B", "on": ["failure", "later"]}]',
     'notifier [0] on must be a non-empty list of start, success, failure, recovered, no_input, '
     'deadline, '
     'got ["failure", "later"]'),
    ('[{"class": "a.B", "args": []}]',
     "notifier [0] has unknown field(s) args; fields: class, kwargs, on"),
])
def test_a_bad_notifiers_setting_names_the_entry_and_field(text, problem):
    with pytest.raises(ValueError) as raised:
        parse_notifiers(text)
    assert str(raised.value) == problem


def test_the_notifiers_setting_is_checked_where_it_is_read(tmp_path):
    env = {"TOKOKITA_NOTIFIERS": '[{"class": "x"}]', "TOKOKITA_HOME": str(tmp_path)}
    expected = ('TOKOKITA_NOTIFIERS: notifiers: notifier [0] class must be an import path '
                'like package.module.Notifier, got "x"')
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        load_settings(env=env, cwd=tmp_path)


def test_the_notifiers_are_read_from_the_environment(tmp_path):
    text = f'[{{"class": "{SMTP}", "kwargs": {{"to": "ops@tokokita.test"}}}}]'
    assert load_settings(env={"TOKOKITA_NOTIFIERS": text}, cwd=tmp_path).notifiers == text
    assert load_settings(env={}, cwd=tmp_path).notifiers == ""
